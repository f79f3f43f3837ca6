"""views.base.show_slider: the widget's first frame is the static picture's frame at the start, made once."""

import ipywidgets as widgets

from course_utils.views.base import View, show_slider


class Frames(View):
    """A slider view whose frames are HTML; it records every update and can fail at one value."""

    def __init__(self, fails_at=None):
        self.calls, self.fails_at = [], fails_at

    def update(self, value):
        self.calls.append(value)
        if value == self.fails_at:
            raise ValueError(f"no frame at {value:g}")
        return f"<p>frame {value:g}</p>"

    def caption(self):
        return f"at {self.calls[-1]:g}"


def test_the_start_frame_is_made_once_and_shown_first():
    view = Frames()
    slider = widgets.FloatSlider(value=0.5, min=0.0, max=1.0)
    _, note, frame = show_slider(view, slider, "x").children
    assert sorted(view.calls) == [0.0, 0.5, 1.0], view.calls          # the ends and the start, each once
    assert view.calls[-1] == 0.5                                        # the view is left at the start
    assert frame.value == "<p>frame 0.5</p>" and note.value == "at 0.5"
    slider.value = 0.25                                                 # a move makes its own frame
    assert frame.value == "<p>frame 0.25</p>" and note.value == "at 0.25" and view.calls[-1] == 0.25


def test_a_failing_frame_leaves_the_widget_at_the_start():
    view = Frames(fails_at=1.0)
    slider = widgets.FloatSlider(value=0.5, min=0.0, max=1.0)
    _, note, frame = show_slider(view, slider, "x").children
    assert frame.value == "<p>frame 0.5</p>" and note.value == "at 0.5"
    slider.value = 1.0                                                  # the student's function fails here
    assert "raised ValueError: no frame at 1" in note.value and frame.value == "<p>frame 0.5</p>"


def test_fast_png_decodes_to_its_pixels_and_stacks():
    """png_bytes (the frames' encoder) is a PNG any reader decodes to the same pixels, RGB and RGBA;
    stack_pngs puts frames one above the other, from their pixels or from plain PNG bytes alike."""
    import io
    import zlib

    import numpy as np
    from PIL import Image

    from course_utils.views.base import png_bytes, stack_pngs

    pixels = np.random.default_rng(0).integers(0, 256, size=(7, 11, 4), dtype=np.uint8)
    for image in (pixels, pixels[..., :3]):
        decoded = np.asarray(Image.open(io.BytesIO(png_bytes(image))))
        assert decoded.shape == image.shape and (decoded == image).all()
    frame = png_bytes(pixels)
    plain = bytes(frame)                                   # no pixels kept: stack_pngs decodes it
    sheet = np.asarray(Image.open(io.BytesIO(stack_pngs([frame, plain], ["a", "b"]))))
    assert sheet.shape == (2 * (7 + 30), 11, 4)            # RGBA, as the frame (a canvas's frames are)
    assert (sheet[30:37] == pixels).all() and (sheet[67:74] == pixels).all() and (sheet[:30, :, 3] == 255).all()
    rgb = png_bytes(pixels[..., :3])                       # its deflated rows go into the sheet as they are
    wide = png_bytes(np.zeros((5, 13, 3), np.uint8))       # wider: the sheet is 13 wide, the others padded white
    sheet = stack_pngs([rgb, wide, bytes(rgb)], ["a", "b", "c"])
    assert len(zlib.decompress(sheet[41:-16])) == (7 + 5 + 7 + 3 * 30) * (1 + 3 * 13)   # one IDAT: one zlib stream, its adler-32 checked
    sheet = np.asarray(Image.open(io.BytesIO(sheet)))
    assert sheet.shape == (7 + 5 + 7 + 3 * 30, 13, 3) and (sheet[30:37, :11] == pixels[..., :3]).all()
    assert (sheet[30:37, 11:] == 255).all() and (sheet[67:72] == 0).all() and (sheet[102:109, :11] == pixels[..., :3]).all()
    mixed = np.asarray(Image.open(io.BytesIO(stack_pngs([rgb, frame], ["a", "b"]))))   # RGBA if one frame is
    assert mixed.shape == (2 * (7 + 30), 11, 4) and (mixed[30:37, :, :3] == pixels[..., :3]).all()
    assert (mixed[30:37, :, 3] == 255).all() and (mixed[67:74] == pixels).all()


def test_palette_is_matplotlibs_petroff10():
    """palette() reads the petroff10 style's own file: the same ten colours, in order, as matplotlib's
    style library gives for it."""
    from matplotlib import style

    from course_utils.views.base import palette

    assert palette() == list(style.library["petroff10"]["axes.prop_cycle"].by_key()["color"])
    assert len(set(palette())) == 10


def test_few_ticks_makes_only_the_ticks_it_draws():
    """few_ticks' locator leaves out MaxNLocator's ticks past the ends (made as Ticks, never drawn): the
    same picture with fewer ticks made."""
    from matplotlib.ticker import MaxNLocator

    from course_utils.views.base import Figure, few_ticks, figure_png

    def draw(ticks):
        fig = Figure(figsize=(3, 2), dpi=50)
        ax = fig.subplots()
        ax.plot([0.03, 0.97], [-0.7, 1.3])
        ticks(ax.xaxis)
        ticks(ax.yaxis)
        return figure_png(fig), [len(axis.get_major_ticks()) for axis in (ax.xaxis, ax.yaxis)]

    png, made = draw(few_ticks)
    png_all, made_all = draw(lambda axis: axis.set_major_locator(MaxNLocator(4, steps=[1, 2, 5, 10])))
    assert png == png_all and all(a < b for a, b in zip(made, made_all)), (made, made_all)


def test_first_figure_freezes_matplotlib():
    """matplotlib, imported with the first figure, has its objects frozen then (gc.freeze, as the views'
    import does for torch's): a full collection during a slider's first draw does not walk them."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import gc, sys, course_utils.views.base as B; assert 'matplotlib' not in sys.modules; "
            "n = gc.get_freeze_count(); B.Figure(); print(gc.get_freeze_count() - n)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert int(res.stdout) > 30_000, res.stdout


def a_kernels_shell(events=None):
    """A stand-in for ipykernel's shell (get_ipython() in a kernel): its cell events and its ``kernel``."""
    from types import SimpleNamespace

    return SimpleNamespace(events=events, kernel=SimpleNamespace())


def test_kernel_loop_is_a_kernels_running_loop_only(outside_a_kernel, monkeypatch):
    """kernel_loop(): the running loop only where IPython's shell is a kernel's; a loop that runs in a plain
    process (another library's, a test's) is no kernel, nor is a kernel's shell outside its loop."""
    import asyncio

    from IPython.core.interactiveshell import InteractiveShell

    from course_utils.views.base import kernel_loop

    async def inside(shell):
        monkeypatch.setattr("IPython.get_ipython", lambda: shell)
        return kernel_loop(), asyncio.get_running_loop()

    assert asyncio.run(inside(None))[0] is None                          # a running loop, no shell
    assert asyncio.run(inside(InteractiveShell()))[0] is None            # IPython's, not a kernel's
    loop, running = asyncio.run(inside(a_kernels_shell()))
    assert loop is running                                               # a kernel's shell in its loop
    assert kernel_loop() is None                                         # the same shell, no loop running


def test_a_redo_of_the_static_picture_waits_in_a_kernel_until_the_slider_rests(outside_a_kernel, monkeypatch):
    """redo_still() puts a new static picture in place of the one shown (an update of the output's display
    id): at once outside a kernel; in a kernel (its shell, its running loop) once the slider has rested,
    since the output re-drawn would end a drag; once."""
    import asyncio

    from course_utils.views import base

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda data, **kwargs: shown.append(kwargs))
    view, slider = Frames(), widgets.FloatSlider(value=0.5, min=0.0, max=1.0)
    show_slider(view, slider, "x").redo_still()                         # no loop: at once
    assert [s["update"] for s in shown] == [False, True] and shown[0]["display_id"] == shown[1]["display_id"]
    monkeypatch.setattr("IPython.get_ipython", a_kernels_shell)

    async def moves(rest_s, then_s):
        """redo_still() waiting rest_s, then the slider moving twice with a rest of then_s, and once more."""
        shown.clear()
        slider = widgets.FloatSlider(value=0.5, min=0.0, max=1.0)
        monkeypatch.setattr(base, "STILL_AFTER_REST_S", rest_s)
        show_slider(view, slider, "x").redo_still()
        monkeypatch.setattr(base, "STILL_AFTER_REST_S", then_s)
        for value in (0.25, 0.3, 0.75):
            slider.value = value
            await asyncio.sleep(0.01)
        return [s["update"] for s in shown]

    assert asyncio.run(moves(3600.0, 3600.0)) == [False]                 # never rested
    assert asyncio.run(moves(3600.0, 0.0)) == [False, True]              # each move waits anew: rested, once


def test_at_request_end_runs_a_task_once_when_the_cell_has_run(outside_a_kernel, monkeypatch):
    """at_request_end: nothing outside a kernel; in a kernel the task runs once, at the cell's end
    (post_run_cell: inside the cell's request, which a notebook client keeps), not again on the loop's
    turn (nor an error there) nor at a later cell's end; shown outside a cell (a widget's message: no
    post_run_cell comes), on the loop's next turn."""
    import asyncio

    from IPython.core.events import EventManager, available_events

    from course_utils.views.base import at_request_end

    ran = []
    assert at_request_end(lambda: ran.append("script")) is False and ran == []

    async def loop_of_no_kernel():
        scheduled = at_request_end(lambda: ran.append("task"))
        await asyncio.sleep(0.01)
        return scheduled

    assert asyncio.run(loop_of_no_kernel()) is False and ran == []     # a running loop, no kernel's shell
    events = EventManager(None, available_events)

    async def request(in_a_cell):
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: ran.append("error on the loop"))
        assert at_request_end(lambda: ran.append("task"))
        before = list(ran)
        if in_a_cell:
            events.trigger("post_run_cell", None)                   # the cell has run
        during = list(ran)
        await asyncio.sleep(0.01)                                   # the loop's turns
        events.trigger("post_run_cell", None)                       # a later cell
        return before, during, list(ran)

    monkeypatch.setattr("IPython.get_ipython", lambda: a_kernels_shell(events))
    assert asyncio.run(request(True)) == ([], ["task"], ["task"])
    ran.clear()
    assert asyncio.run(request(False)) == ([], [], ["task"])
