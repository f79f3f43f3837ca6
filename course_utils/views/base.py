"""What every view of the labs shares: the protocol of an explore cell, fast slider frames, PNG bytes.

The protocol. Every explore cell is

    with needs("Task 4 (tilted_optimum and kl_objective)"):
        views.BetaView(ref_first, ref_second, rewards, tilted_optimum, kl_objective).show()

A view's constructor only keeps its arguments. ``show()`` does the work -- calls the student's
functions (an unfinished one raises NotImplementedError, which ``needs`` of views/explore.py turns into one line),
trains or enumerates what the view needs, draws -- and displays it; while nbgrader grades the
notebook (``runtime.grading()``) it returns at once and prints nothing. ``prepare()`` does the work
without displaying anything (tests, benchmarks). A slider view's ``update(value)`` returns the frame
for one slider value (PNG bytes, or an HTML string) and ``caption()`` a line under the slider.

Sliders re-draw often: ``FastFigure`` renders a figure's static parts once and each frame only the
artists that move, encoded with fast PNG compression; ``show_slider`` wires a slider to a view.
"""

import functools
import io

from course_utils.runtime import grading


class View:
    """Base of every view: ``show()`` = ``prepare()`` (once) + ``display()``, nothing while grading."""

    _prepared = False

    def prepare(self):
        """Do the view's work once (call the student's functions, train, enumerate); returns self."""
        if not self._prepared:
            self._prepare()
            self._prepared = True
        return self

    def show(self):
        """Prepare and display the view in the notebook; while grading, do nothing. Returns None
        (a cell that ends in ``view.show()`` shows the view, not its repr)."""
        if grading():
            return
        self.prepare()
        self.display()

    def _prepare(self):
        """The work; subclasses override it."""

    def display(self):
        raise NotImplementedError(f"{type(self).__name__} defines no display()")


def figure_png(fig, dpi=80):
    """PNG bytes of a whole matplotlib Figure (``dpi="figure"`` keeps the figure's own)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def canvas_png(canvas):
    """PNG bytes of what an Agg canvas holds now (fast compression: a slider frame is re-made often)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1) \
        .save(buf, format="png", compress_level=1)
    return buf.getvalue()


def Figure(**kwargs):
    """A matplotlib Figure, with no pyplot state. matplotlib is imported on the first figure, not with
    the views: a grading kernel imports every view and draws none (a third of a second saved per
    graded notebook)."""
    return _figure_classes()[0](**kwargs)


def PngFigure(**kwargs):
    """A Figure that shows itself as a PNG in a notebook (``display(fig)``), with no pyplot state."""
    return _figure_classes()[1](**kwargs)


@functools.cache
def _figure_classes():
    from matplotlib.figure import Figure

    class PngFigure(Figure):
        def _repr_png_(self):
            return figure_png(self)

    return Figure, PngFigure


class FastFigure:
    """A figure whose static parts are rendered once; each frame redraws only ``dynamic`` artists.

    Re-rendering axes, ticks and colorbars is what makes a matplotlib re-plot slow; here a frame is
    restore-background + draw a few artists + a fast PNG encode (a few tens of ms). The layout is
    fixed at the first render.
    """

    def __init__(self, fig, dynamic):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        self.fig, self.dynamic = fig, list(dynamic)
        for artist in self.dynamic:
            artist.set_animated(True)           # left out of the background
        self.canvas = FigureCanvasAgg(fig)
        self.canvas.draw()
        fig.set_layout_engine("none")           # keep the layout of that first render
        self.background = self.canvas.copy_from_bbox(fig.bbox)

    def png(self):
        """The frame as PNG bytes: the background, then the dynamic artists as they are now."""
        self.canvas.restore_region(self.background)
        for artist in self.dynamic:
            self.fig.draw_artist(artist)
        return canvas_png(self.canvas)


def log_axis(ax, which, ticks, scale="log", **scale_args):
    """Make the ``which`` ("x" or "y") axis of ``ax`` logarithmic (``scale="symlog"``: linear near 0),
    with major ticks at ``ticks`` labelled in plain text ("0.01", "10") and no minor ticks: the default
    log axis makes dozens of minor ticks and labels each major one in mathtext, which costs most of a
    slider's first draw in a fresh kernel."""
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullLocator

    getattr(ax, f"set_{which}scale")(scale, **scale_args)
    axis = getattr(ax, f"{which}axis")
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FormatStrFormatter("%g"))


def show_slider(view, slider, describe):
    """Display ``slider``, a caption and the frame ``view.update(value)``: a PNG image in an Output
    widget, or an HTML string in an HTML widget.

    Returns the VBox (slider, caption, frame). A student's function that fails at some slider value
    is reported in the caption; the last good frame stays.
    """
    import ipywidgets as widgets
    from IPython.display import Image, display

    note = widgets.HTML()
    frame = None                                   # the frame's widget, made for the first frame's kind

    def redraw(value):
        nonlocal frame
        try:
            png_or_html = view.update(value)
        except Exception as err:  # noqa: BLE001 -- a student's function failed: say so, keep going
            note.value = (f"<b>At {describe} = {value:g} your function raised "
                          f"{type(err).__name__}: {err}</b>")
            return
        note.value = view.caption()
        if frame is None:
            frame = widgets.HTML() if isinstance(png_or_html, str) else widgets.Output()
        if isinstance(png_or_html, str):
            frame.value = png_or_html
            return
        with frame:
            frame.clear_output(wait=True)
            display(Image(data=png_or_html, format="png"))

    slider.observe(lambda change: redraw(change["new"]), names="value")
    redraw(slider.value)
    box = widgets.VBox([slider, note, frame or widgets.Output()])
    display(box)
    return box


__all__ = ["View", "figure_png", "canvas_png", "Figure", "PngFigure", "FastFigure", "log_axis", "show_slider"]
