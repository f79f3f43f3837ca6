"""What every view needs from matplotlib: PNG bytes of a figure or of a slider frame.

Sliders re-draw often, so their frames are encoded with fast PNG compression (``canvas_png``);
figures drawn once show themselves in a notebook as PNG (``PngFigure``), with no pyplot state.
"""

import io

from matplotlib.figure import Figure


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


class PngFigure(Figure):
    """A Figure that shows itself as a PNG in a notebook (``display(fig)``), with no pyplot state."""

    def _repr_png_(self):
        return figure_png(self)


__all__ = ["figure_png", "canvas_png", "PngFigure"]
