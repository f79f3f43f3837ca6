"""What every view of the labs shares: the protocol of an explore cell, fast slider frames, PNG bytes.

The protocol. Every explore cell is

    with needs("Task 4 (tilted_optimum and kl_objective)"):
        views.BetaView(ref_first, ref_second, rewards, tilted_optimum, kl_objective).show()

A view's constructor only keeps its arguments. ``show()`` does the work -- calls the student's
functions (an unfinished one raises NotImplementedError, which ``needs`` of course_utils/explore.py turns into one line),
trains or enumerates what the view needs, draws -- and displays it; while nbgrader grades the
notebook (``runtime.grading()``) it returns at once and prints nothing. ``prepare()`` does the work
without displaying anything (tests, benchmarks). A slider view's ``update(value)`` returns the frame
for one slider value (PNG bytes, or an HTML string) and ``caption()`` a line under the slider.

Sliders re-draw often: ``FastFigure`` renders a figure's static parts once and each frame only the
artists that move, encoded with fast PNG compression; ``show_slider`` wires a slider to a view.

Every image the course shows carries alt text: what is plotted and its main result, in words. It goes
through one place, ``image_output``: the text is the image's ``alt`` in the output's metadata (what
nbconvert's HTML template ``classic`` writes as ``<img alt=...>``) and the output's ``text/plain``
(what a front-end that shows no image, a text export, or a reader of the .ipynb gets). A figure made
with ``PngFigure`` carries its text as ``fig.alt``; ``show_png(png, alt)`` shows PNG bytes; a slider
view's ``alt()`` describes its current frame.

Colours: ``series(i)`` gives the i-th line of a plot a colour of matplotlib's colour-blind-safe
``petroff10`` cycle and a line style and marker of its own, so no line is told apart by colour alone.

A slider's frame is an ``<img>`` with its alt text in an HTML widget (``img_html``: JupyterLab reads
that alt, where it ignores an image output's), never an Output widget (``show_slider`` says why).

A slider degrades to pictures: ``show_slider`` displays the widget together with a static figure of
the slider at a few positions (``image/png`` next to the widget's own data). A front-end with widgets
(JupyterLab) shows the widget; one without (an HTML export, VS Code without the widget renderer, a
PDF) shows the picture.
"""

import base64
import functools
import gc
import io
import re
import struct
import zlib

LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")

from course_utils.runtime import grading

# The lab's import cell has imported torch by now: some 400 000 objects that live as long as the kernel.
# A full garbage collection walks every object (about 200 ms of CPU with these in the heap) and comes
# whenever a quarter as many again have been made since the last one, as often as not in the middle
# of a slider's first draw. Frozen (CPython's gc.freeze, meant for objects made at start-up), they are
# never walked again: a later full collection walks only what the notebook made since. matplotlib's, imported
# with the first figure, are frozen then (``_figure_classes``). What is frozen is still freed when no reference
# to it is left; only a reference cycle among frozen objects that dies stays in memory.
gc.freeze()


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

    def alt(self):
        """A slider view's alt text for its current frame: what is plotted and what it shows."""
        raise NotImplementedError(f"{type(self).__name__} defines no alt()")


def palette():
    """The ten colours of matplotlib's colour-blind-safe ``petroff10`` style (Petroff 2021), in its order."""
    return list(_petroff10())


@functools.cache
def _petroff10():
    """Read from the style's own file: ``matplotlib.style.library`` reads all thirty-odd styles on first
    use (10 ms of a slider's first draw)."""
    from pathlib import Path

    import matplotlib

    style = matplotlib.rc_params_from_file(Path(matplotlib.get_data_path(), "stylelib", "petroff10.mplstyle"),
                                           use_default_template=False)
    return tuple(style["axes.prop_cycle"].by_key()["color"])


def series(i, markevery=0.1):
    """Style of the i-th line of a plot: colour, line style and marker all differ from line to line
    (``markevery``: a marker every tenth of the axes, not at every point)."""
    return {"color": palette()[i % 10], "ls": LINESTYLES[i % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)], "markevery": markevery}


def image_output(png, alt):
    """(data, metadata) of an image output: the PNG with ``alt`` in its metadata and as text/plain."""
    if not alt or not alt.strip():
        raise ValueError("every image the course shows needs its alt text")
    return ({"image/png": base64.b64encode(png).decode("ascii"), "text/plain": alt},
            {"image/png": {"alt": alt}})


def show_png(png, alt):
    """Display PNG bytes with their alt text (``image_output``)."""
    from IPython.display import display

    data, metadata = image_output(png, alt)
    display(data, metadata=metadata, raw=True)


def plain(html):
    """An HTML caption as plain text: tags dropped, entities of the course's captions undone."""
    text = re.sub(r"<br\s*/?>", "; ", html)
    return re.sub(r"<[^>]+>", "", text).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")


def figure_png(fig, dpi=80):
    """PNG bytes of a whole matplotlib Figure (``dpi="figure"`` keeps the figure's own)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


class Png(bytes):
    """PNG bytes that keep the pixels they encode, (H, W, 3 or 4) uint8, and their rows deflated
    (``_deflate``): ``stack_pngs`` reads those instead of decoding the PNG again, and puts a frame's
    deflated rows into the sheet as they are instead of compressing them again."""

    pixels = None
    deflated = None


def png_bytes(pixels):
    """PNG bytes (a ``Png``) of an (H, W, 3) RGB or (H, W, 4) RGBA uint8 array, fast: rows unfiltered,
    zlib level 1. Pillow's encoder tries five row filters on every row, which on a figure's flat
    areas costs twice the time (8 ms against 3 ms for a slider frame) for a few % of size."""
    import numpy as np

    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    h, w, c = pixels.shape
    rows = np.zeros((h, 1 + w * c), np.uint8)                    # each row: filter type 0 (none), its bytes
    rows[:, 1:] = pixels.reshape(h, w * c)
    png = _png_of_rows(rows, c)
    png.pixels = pixels
    return png


def _png_of_rows(rows, c):
    """A ``Png`` of unfiltered PNG rows, (H, 1 + W * c) uint8 (each row: its filter byte 0, then its
    pixels' bytes), c = 3 (RGB) or 4 (RGBA)."""
    deflated = _deflate(rows)
    png = _png_of_deflated([deflated], (rows.shape[1] - 1) // c, rows.shape[0], c)
    png.deflated = deflated
    return png


def _deflate(rows):
    """``rows`` (a C-contiguous uint8 array) compressed at zlib level 1 as (raw deflate blocks that end
    byte-aligned with no reference to what came before (a full flush), the bytes' adler-32, their
    number): such blocks of several arrays, one after the other, are one zlib stream of their bytes one
    after the other (``_png_of_deflated``), each compressed once."""
    z = zlib.compressobj(1, zlib.DEFLATED, -15)
    return z.compress(rows.data) + z.flush(zlib.Z_FULL_FLUSH), zlib.adler32(rows.data), rows.nbytes


def _png_of_deflated(parts, w, h, c):
    """A ``Png`` of W x H pixels whose unfiltered rows are the ``_deflate`` parts one after the other."""
    check = 1                                                    # adler-32 of no bytes
    for _, adler, n in parts:                                    # of the parts' bytes one after the other
        low, high = (check & 0xFFFF) + (adler & 0xFFFF) - 1, (check >> 16) + (adler >> 16) + n * ((check & 0xFFFF) - 1)
        check = (high % 65521) << 16 | low % 65521
    stream = b"\x78\x01" + b"".join(blocks for blocks, _, _ in parts) + b"\x03\x00" + struct.pack(">I", check)
    header = struct.pack(">IIBBBBB", w, h, 8, {3: 2, 4: 6}[c], 0, 0, 0)    # 8 bits, RGB or RGBA, no interlace
    return Png(b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", stream)
               + _png_chunk(b"IEND", b""))


def _png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def canvas_png(canvas):
    """PNG bytes of what an Agg canvas holds now (``png_bytes``: a slider frame is re-made often)."""
    import numpy as np

    return png_bytes(np.array(canvas.buffer_rgba()))             # a copy: the canvas draws the next frame


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
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401 -- imported here to be frozen with the rest
    from matplotlib.figure import Figure

    gc.freeze()         # matplotlib's 60 000-odd objects, as the module's own above: ~25 ms of CriticView's first draw

    class PngFigure(Figure):
        """Shows itself as a PNG with its alt text ``self.alt`` (set by whoever draws it); without
        one, as a plain PNG."""

        alt = None

        def _repr_png_(self):
            return figure_png(self)

        def _repr_mimebundle_(self, include=None, exclude=None):
            png = figure_png(self)
            if self.alt:
                return image_output(png, self.alt)
            return {"image/png": base64.b64encode(png).decode("ascii")}, {}

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


def few_ticks(axis):
    """At most five round ticks on ``axis`` (0, 0.5, 1; 0, 50, 100), the ``ax.xaxis`` or ``ax.yaxis`` of a
    linear axis: a slider's first draw makes every tick of every panel, and the default's seven or
    eight a panel are a fifth of it."""
    axis.set_major_locator(_in_view_locator(4, steps=[1, 2, 5, 10]))


def _in_view_locator(*args, **kwargs):
    """A MaxNLocator(*args, **kwargs) that gives only the ticks inside the axis's view: MaxNLocator's one
    past each end is made as a Tick (lines and labels) on the first draw but never drawn."""
    from matplotlib.ticker import MaxNLocator

    class InView(MaxNLocator):
        def __call__(self):
            lo, hi = sorted(self.axis.get_view_interval())
            slack = 1e-6 * (hi - lo)                 # matplotlib draws a tick a rounding error outside
            return [t for t in super().__call__() if lo - slack <= t <= hi + slack]

    return InView(*args, **kwargs)


STILL_AFTER_REST_S = 1.0        # show_slider's redo_still: how long the slider rests before the output is re-drawn


def show_slider(view, slider, describe):
    """Display ``slider``, a caption and the frame ``view.update(value)`` in an HTML widget: a PNG as an
    ``<img>`` with its alt text ``view.alt()`` (``img_html``), or the view's HTML; next to the widget, a
    static picture of the frames at a few positions (``slider_positions``) for front-ends without
    widgets (module docstring).

    Not an ``ipywidgets.Output``: a notebook client that runs the notebook (nbclient, so ``jupyter
    nbconvert --execute``, nbgrader, papermill) answers every output captured by an Output widget with
    a comm message to the kernel on the shell socket, while it waits on that same socket for the cell's
    reply; the send takes the socket's zmq wake-up, the reply stays unread and a client without a time
    limit waits forever (Lab 12's Experiment 8 under ``jupyter nbconvert --execute``). Measured with the
    stock client and a 3 s limit: 100 of 150 cells that showed a PNG in an Output widget waited out the
    limit, 0 of 150 with the PNG in an HTML widget.

    Returns the VBox (slider, caption, frame). A student's function that fails at some slider value
    is reported in the caption; the last good frame stays. The box's ``redo_still()`` makes the static
    picture again and puts it in place of the one shown (the output's display id): for a view whose
    frames gain, after its first draw, what that draw left for later (CriticView's critic). In a kernel
    it does so once the slider has rested for STILL_AFTER_REST_S (the output re-drawn ends a drag).
    The box's ``complete()`` makes the frame at the slider's value again and, with it, the static
    picture at once: for such a view, completing itself when the kernel is free (at_request_end).
    """
    import uuid

    import ipywidgets as widgets
    from IPython.display import display

    note = widgets.HTML()
    frame = widgets.HTML()

    def show(png_or_html, alt, caption):
        note.value = caption
        frame.value = png_or_html if isinstance(png_or_html, str) else img_html(png_or_html, alt)

    def redraw(value):
        try:
            png_or_html = view.update(value)
        except Exception as err:  # noqa: BLE001 -- a student's function failed: say so, keep going
            note.value = (f"<b>At {describe} = {value:g} your function raised "
                          f"{type(err).__name__}: {err}</b>")
            return
        show(png_or_html, "" if isinstance(png_or_html, str) else view.alt(), view.caption())

    start, positions = slider.value, slider_positions(slider)
    still, at_start = static_frames(view, positions, describe, start=start)
    slider.observe(lambda change: redraw(change["new"]), names="value")
    if at_start is None:                           # a frame failed: the start's own redraw says why
        redraw(start)
    else:                                          # the static picture's frame at the start, made once
        show(*at_start)
    box = widgets.VBox([slider, note, frame])
    shown = uuid.uuid4().hex                       # the output's display id

    def output(still, update=False):
        data = box._repr_mimebundle_()             # the widget, for front-ends that have widgets
        metadata = {}
        if still is not None:
            extra, metadata = still
            data.update(extra)                     # the picture (or tables) for those that have none
        display(data, metadata=metadata, raw=True, display_id=shown, update=update)

    resting = []                                   # a redo of the static picture, waiting for the slider to rest

    def redo():
        resting.clear()
        again = static_frames(view, positions, describe)
        if again is not None:                      # a frame failed: the picture shown stays
            output(again, update=True)

    def redo_still():
        loop = kernel_loop()                       # a kernel's: the widget's moves come through it
        if loop is None:                           # none (a script, a test): at once
            return redo()
        for waiting in resting:                    # putting the output in place re-draws the widget, which
            waiting.cancel()                       # would end a drag: only once the slider has rested
        resting[:] = [loop.call_later(STILL_AFTER_REST_S, redo)]

    def complete():
        redraw(slider.value)                       # the view's frame as it is now (a failure: the caption says why)
        for waiting in resting:                    # and, if it was made, the static picture, at once: no drag
            waiting.cancel()                       # is under way (the kernel was busy until now)
        if resting:
            redo()

    slider.observe(lambda change: resting and redo_still(), names="value")     # still moving: wait on
    output(still)
    box.redo_still, box.complete = redo_still, complete
    return box


def kernel_loop():
    """The running event loop of the Jupyter kernel the caller runs in, or None (a script, a test).

    In a kernel means IPython's shell is a kernel's (ipykernel's, which has a ``kernel``), not merely that
    a loop runs: another library's loop can read as running in a plain process (Playwright's sync API
    marks its own so for as long as it is open), and a view there has no kernel to complete it."""
    import asyncio
    import sys

    ipython = sys.modules.get("IPython")            # not imported: no shell, and not imported for the asking
    if getattr(ipython and ipython.get_ipython(), "kernel", None) is None:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def at_request_end(task):
    """In a kernel, run ``task()`` once when the request now running ends: after the cell's code
    (IPython's post_run_cell), or, outside a cell (a widget's message), on the event loop's next turn.
    True if scheduled; False (nothing done) outside a kernel (``kernel_loop``).

    Not later, on an idle kernel: a notebook client that runs the notebook (nbclient, so ``jupyter
    nbconvert --execute``, nbgrader) keeps only the outputs whose parent is the request it is waiting
    on, sends the next cell the moment one ends (no idle time) and stops the kernel after the last;
    an update sent after the request's end never reaches the notebook it saves."""
    from IPython import get_ipython

    loop = kernel_loop()
    if loop is None:
        return False
    events = get_ipython().events                  # a kernel's shell (kernel_loop)

    def run(*_):
        events.unregister("post_run_cell", run)
        turn.cancel()
        task()

    turn = loop.call_soon(run)                     # outside a cell: after this request; in one, the hook comes first
    events.register("post_run_cell", run)
    return True


def img_html(png, alt):
    """An HTML ``<img>`` of PNG bytes with its alt text, no wider than its output area."""
    import html

    if not alt or not alt.strip():
        raise ValueError("every image the course shows needs its alt text")
    return (f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" '
            f'alt="{html.escape(alt, quote=True)}" style="max-width:100%;height:auto">')


def slider_positions(slider):
    """A few representative values of ``slider``: its two ends and where it starts, in order."""
    import ipywidgets as widgets

    if isinstance(slider, widgets.SelectionSlider):
        values = [o[1] if isinstance(o, tuple) else o for o in slider.options]
        ends = values[0], values[-1]
    elif isinstance(slider, widgets.FloatLogSlider):
        ends = slider.base ** slider.min, slider.base ** slider.max
    else:
        ends = slider.min, slider.max
    return sorted({float(ends[0]), float(slider.value), float(ends[1])})


def static_frames(view, values, describe, start=None):
    """The view's frames at ``values`` as one output for front-ends without widgets: (data, metadata)
    of a PNG of the frames one above the other, each under its value, with alt text saying what each
    shows; for HTML frames, the tables one after the other. None if a frame fails (the widget's
    caption then says why).

    With ``start`` (one of ``values``: the slider's start), returns (that output, the start's frame as
    (frame, alt, caption)) and makes the start's frame last, so the view is left at it: the widget
    shows that frame without making it again. (None, None) if a frame fails."""
    order = sorted(range(len(values)), key=lambda i: values[i] == start)     # the start's frame last
    frames, alts = [None] * len(values), [None] * len(values)
    try:
        for i in order:
            frames[i] = view.update(start if values[i] == start else values[i])   # the start as the slider has it
            alts[i] = view.alt() if not isinstance(frames[i], str) else ""
    except Exception:  # noqa: BLE001 -- a student's function failed: the widget reports it
        return None if start is None else (None, None)
    still = _stacked(frames, alts, values, describe)
    if start is None:
        return still
    last = order[-1]
    return still, ((frames[last], alts[last], view.caption()) if values[last] == start else None)


def _stacked(frames, alts, values, describe):
    """static_frames' output of the frames made at ``values``."""
    heads = [f"{describe} = {value:g}" for value in values]
    intro = (f"Slider {describe}, shown at {', '.join(f'{v:g}' for v in values)} (a static picture: "
             f"this page shows no widgets).")
    if all(isinstance(f, str) for f in frames):
        html = "".join(f"<h4>{head}</h4>{table}" for head, table in zip(heads, frames))
        return {"text/html": f"<p>{intro}</p>{html}", "text/plain": intro}, {}
    alt = " ".join([intro] + [f"At {head}: {text}" for head, text in zip(heads, alts)])
    return image_output(stack_pngs(frames, heads), alt)


def stack_pngs(pngs, heads):
    """One PNG of ``pngs`` one above the other, each under a line of text (``heads``): RGBA if a frame
    is (a canvas's), else RGB. The sheet's rows are deflated piece by piece (``_deflate``), a frame's
    of its channels as its own PNG has them (``Png.deflated``): a slider's frames are not compressed twice."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFont

    kept = [getattr(png, "pixels", None) for png in pngs]
    c = 4 if any(p is not None and p.shape[2] == 4 for p in kept) else 3
    images = [p if p is not None else np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"[:c])) for p, png in zip(kept, pngs)]
    images = [im if im.shape[2] == c else np.dstack([im, np.full(im.shape[:2], 255, np.uint8)]) if c == 4 else im[..., :3]
              for im in images]
    font = ImageFont.load_default(size=18)
    line = 30
    width = max(im.shape[1] for im in images)
    parts = []
    for png, im, head in zip(pngs, images, heads):
        strip = Image.new("RGBA"[:c], (width, line), "white")     # the head: black text on white
        ImageDraw.Draw(strip).text((8, 5), head, fill="black", font=font)
        parts.append(_deflate(_rows(np.asarray(strip), width)))
        same = getattr(png, "deflated", None) is not None and im is png.pixels and im.shape[1] == width
        parts.append(png.deflated if same else _deflate(_rows(im, width)))    # a frame's rows as they are
    return _png_of_deflated(parts, width, sum(im.shape[0] + line for im in images), c)


def _rows(image, width):
    """Unfiltered PNG rows of an (H, W, c) uint8 image, opaque white on its right up to ``width``:
    (H, 1 + c * width)."""
    import numpy as np

    h, w, c = image.shape
    rows = np.full((h, 1 + c * width), 255, np.uint8)
    rows[:, 0] = 0                                               # each row's filter type: none
    rows[:, 1:1 + c * w] = image.reshape(h, c * w)
    return rows


__all__ = ["View", "palette", "series", "image_output", "show_png", "plain", "figure_png", "Png", "png_bytes", "canvas_png", "Figure",
           "PngFigure", "FastFigure", "log_axis", "few_ticks", "show_slider", "kernel_loop", "at_request_end", "img_html", "slider_positions", "static_frames", "stack_pngs"]
