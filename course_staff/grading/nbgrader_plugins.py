"""nbgrader preprocessors of the course (named in nbgrader_config.py).

ClearWidgetState  -- generate_assignment: drop saved ipywidgets state, so no image of a solution
                     run can reach release/.
HideTestCode      -- generate_feedback: a failed check shows its error type and message, never the
                     traceback, which would quote the lines of a hidden test.
StartKernelEarly  -- autograde, first sanitize step: starts the kernel Execute will take
                     (course_staff/grading/early_kernel.py), while nbgrader sanitizes the notebook.
SurviveKernelDeath -- autograde: a cell that kills the kernel (os._exit, a crash, out of memory)
                     scores like a failing cell instead of leaving the whole notebook ungraded;
                     a kernel that dies while starting is started again; before each cell with
                     hidden tests, hooks that could watch it run are removed (and reported); hidden
                     blocks run inside a function (no hidden name stays in the kernel); around each
                     such cell the course_utils modules are compared with the kernel's start
                     (MODULE_GUARD), and an audit hook refuses frame access from the notebook's
                     code (AUDIT_HOOK); both are reported.
FlagTampering     -- autograde: a notebook whose cells rebind the checks (``assert_close = ...``),
                     patch a module (``torch.allclose = ...``) or reach for frames or sys.modules,
                     whose kernel had hooks that watch cells run, a replaced course_utils module or
                     refused frame access (SurviveKernelDeath's reports), or whose outputs quote a
                     hidden test (blanked) is held at 0 for a TA's review.
FlagWrittenAnswers -- autograde: every written answer waits for a TA ("needs manual grade"), a
                     blank one included (it keeps the 0 that nbgrader gives it).
ReportNotebookProblems -- autograde, first: what is wrong with the submitted file (a pasted cell, a
                     deleted or edited read-only cell, metadata gone, input(), huge outputs, another
                     kernel: course_utils.notebook_problems, what students' `make check` says) as one
                     NOTEBOOK_PROBLEM line about the student in the log and a note at the top of the
                     graded notebook, which the feedback shows.
RestoreReadOnlyCells -- autograde: nbgrader's OverwriteCells, quiet about the test cells students
                     get without their hidden tests; a real edit of a read-only cell is logged
                     under TAMPER_ALARM with the student's name.
check_config      -- `python -m course_staff.grading.nbgrader_plugins`: load nbgrader_config.py and fail on
                     any error in it, a syntax error included, which nbgrader would only log, and
                     on any outdated name that nbgrader would only warn about (CollectApp, ...).
"""

import ast
import copy
import os

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbclient.util import run_sync
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, Execute, NbGraderPreprocessor, OverwriteCells, OverwriteKernelspec
from traitlets import Bool, Integer

from course_staff.course import WITHHELD, config, is_grade, is_locked, is_solution, is_written_answer
from course_staff.grading import early_kernel

KERNEL_DIED = ("KernelDied", "the kernel died while running this cell (os._exit, a crash or out of "
               "memory); it was skipped, the kernel restarted and the cells above it were run again")
TAMPER_ALARM = "TAMPERING?"      # starts every log line about a submission that may cheat: grep for it
NOTEBOOK_PROBLEM = "NOTEBOOK PROBLEM"   # starts the log line about a submitted file's problems


class ClearWidgetState(NbGraderPreprocessor):
    """Remove notebook-level widget state and widget views from every output."""

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            cell.metadata.pop("widgets", None)
            for output in cell.get("outputs", []):
                output.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
        return nb, resources


class HideTestCode(NbGraderPreprocessor):
    """Replace each error's traceback by the one line 'ErrorType: message'."""

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
# run silently in the kernel before each cell with hidden tests: ``_course_hook_found(None)`` lists
# the hooks that could watch a cell run (IPython's events and input/AST transformers, the trace
# and profile functions of sys and threading); given that list from a fresh kernel, it removes
# every other hook whose code is not a library's (installed under sys.prefix, read-only in the
# sandbox) and returns what it removed
HOOK_GUARD = """
def _course_hook_guard():
    import os, sys, threading
    ip = get_ipython()
    libraries = tuple(os.path.join(p, "") for p in {sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix)})
    def library(hook):      # a library's own code (e.g. matplotlib's inline backend), not a cell's
        file = getattr(getattr(getattr(hook, "__func__", hook), "__code__", None), "co_filename", "")
        return file.startswith(libraries) and os.path.isfile(file)
    def hooks():            # {description: (hook, how to remove it)}
        found = {f"IPython {event} hook {cb!r}": (cb, lambda cbs=ip.events.callbacks[event], cb=cb: cbs.remove(cb))
                 for event in ip.events.callbacks for cb in ip.events.callbacks[event]}
        for name in ("input_transformers_cleanup", "input_transformers_post", "ast_transformers"):
            found.update({f"IPython {name} {t!r}": (t, lambda ts=getattr(ip, name), t=t: ts.remove(t))
                          for t in getattr(ip, name, [])})
        for name, get, put in (("sys.settrace", sys.gettrace, sys.settrace), ("sys.setprofile", sys.getprofile, sys.setprofile),
                               ("threading.settrace", threading.gettrace, threading.settrace),
                               ("threading.setprofile", threading.getprofile, threading.setprofile)):
            if get() is not None:
                found[f"{name}({get()!r})"] = (get(), lambda put=put: put(None))
        return found
    def check(allowed):
        here = hooks()
        if allowed is None:
            return sorted(here)
        removed = []
        for what, (hook, remove) in here.items():
            if what not in allowed and not library(hook):
                remove()
                removed.append(what.split(" at 0x")[0])
        return removed
    return check
_course_hook_found = _course_hook_guard()
"""

# run silently in the kernel before each cell with hidden tests and after the last: ``_course_module_prints(first)``
# is a digest of each course_utils module in sys.modules (the module object, and each function, class and
# callable it holds: identity and bytecode; for the checks' own modules every value, their tolerances too).
# first=True, at a kernel's start, imports course_utils.checks (numpy only) so that its original is known
# before any cell runs; a module imported later is known from the first time a guard sees it. A digest
# that changes means a cell replaced a module in sys.modules or a function or tolerance in one.
MODULE_GUARD = """
def _course_module_prints(first):
    import hashlib, os, sys, types
    if first:
        import course_utils.checks
    whole = ("course_utils.checks", "course_utils.explore")     # every value counts, tolerances too
    prints = {}
    for name, module in list(sys.modules.items()):
        if name != "course_utils" and not name.startswith("course_utils."):
            continue
        if type(module) is not types.ModuleType:
            prints[name] = "not a module: " + type(module).__name__
            continue
        digest = hashlib.sha256(repr((id(module), os.path.realpath(getattr(module, "__file__", "") or ""))).encode())
        for key, value in sorted(module.__dict__.items()):
            if key.startswith("__"):
                continue
            if type(value) is types.FunctionType:
                # (not marshal: its bytes vary with the reference counts of the constants)
                digest.update(repr((key, id(value), id(value.__code__), value.__defaults__,
                                    value.__code__.co_consts, value.__code__.co_names)).encode())
                digest.update(value.__code__.co_code)
            elif isinstance(value, types.ModuleType) and value.__name__ == name + "." + key:
                # a package's submodule, set when it is imported: counts only if it is not the one in sys.modules
                if value is not sys.modules.get(value.__name__):
                    digest.update(repr((key, "not the module in sys.modules")).encode())
            elif callable(value) or isinstance(value, types.ModuleType):
                digest.update(repr((key, id(value))).encode())
            elif name in whole:
                digest.update(repr((key, value)).encode())
        prints[name] = digest.hexdigest()
    return prints
"""

# run once in a new kernel, before any cell: an audit hook (sys.addaudithook: it cannot be removed) that refuses
# frame and object-graph access from the notebook's own code -- a student's function that walks up to the hidden
# test calling it (sys._getframe, a traceback's tb_frame, gc.get_referrers, ...) could read the expected value
# or call the reference. Libraries do such things all the time (namedtuple, logging, torch): only a call made by
# code outside the libraries and course_utils is refused, directly or through a helper that hands back the
# caller's frames (inspect.currentframe, traceback.extract_stack, ...). ``_course_audit_found()`` lists them.
AUDIT_HOOK = """
def _course_audit():
    import os, sys, course_utils
    events = {"sys._getframe", "sys._current_frames", "gc.get_referrers", "gc.get_referents", "gc.get_objects",
              "sys.settrace", "sys.setprofile", "object.__getattr__"}
    frame_attrs = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}
    helpers = {("inspect.py", name) for name in ("currentframe", "stack", "trace", "getouterframes", "getinnerframes")} \\
        | {("traceback.py", name) for name in ("walk_stack", "extract_stack", "format_stack", "print_stack")} \\
        | {("__init__.py", "<lambda>")}                      # logging.currentframe
    libraries = tuple(os.path.join(p, "") for p in {sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix),
                                                     os.path.dirname(os.path.realpath(course_utils.__file__))})
    found, busy = [], []
    def notebook(code):          # a cell's code (or code a cell compiled), not a library's nor the grader's
        name = code.co_filename
        return not (name.startswith(libraries) or name.startswith(("<frozen", "<eval_with_key>"))
                    or code.co_qualname.startswith("_course_"))
    def hook(event, args):
        if event not in events or busy or (event == "object.__getattr__" and args[1:2] and args[1] not in frame_attrs):
            return
        busy.append(event)
        try:
            frame, culprit = sys._getframe(1), None
            for _ in range(4):
                if frame is None:
                    break
                if notebook(frame.f_code):
                    culprit = frame.f_code
                    break
                if (os.path.basename(frame.f_code.co_filename), frame.f_code.co_name) not in helpers:
                    break
                frame = frame.f_back
        finally:
            busy.pop()
        if culprit is not None:
            found.append(f"{event} from {culprit.co_name}()")
            raise RuntimeError(f"{event} is not allowed in a graded notebook")
    sys.addaudithook(hook)
    return lambda: sorted(set(found))
_course_audit_found = _course_audit()
del _course_audit
"""


def has_hidden_tests(cell):
    return HIDDEN_BEGIN in cell.get("source", "")


def hidden_lines(cell, shortest=16, hidden=True):
    """The lines of a cell's hidden tests (hidden=False: its other lines), stripped, that are at
    least ``shortest`` characters."""
    lines, inside = [], False
    for line in cell.get("source", "").splitlines():
        if HIDDEN_BEGIN in line or HIDDEN_END in line:
            inside = HIDDEN_BEGIN in line
        elif inside == hidden and len(line.strip()) >= shortest:
            lines.append(line.strip())
    return lines


def hidden_in_function(source):
    """``source`` with each hidden block's lines made the body of a function that the block calls and then
    deletes: a hidden test's names (its reference, its expected values) leave nothing in the kernel for a
    later cell to read. Unchanged when a block cannot be moved (it would not compile)."""
    lines, out, block = source.splitlines(), [], None
    for line in lines:
        if HIDDEN_BEGIN in line:
            indent = line[:len(line) - len(line.lstrip())]
            out.append(line)
            block = []
        elif HIDDEN_END in line and block is not None:
            out += [f"{indent}def _course_hidden_tests():"]
            out += [f"    {b}" if b.strip() else b for b in block] or [f"{indent}    pass"]
            out += [f"{indent}try:", f"{indent}    _course_hidden_tests()",
                    f"{indent}finally:", f"{indent}    del _course_hidden_tests", line]
            block = None
        elif block is not None:
            block.append(line)
        else:
            out.append(line)
    moved = "\n".join(out) + ("\n" if source.endswith("\n") else "")
    try:
        compile(moved, "<hidden tests>", "exec")
    except SyntaxError:
        return source
    return moved


class SurviveKernelDeath(Execute):
    """nbgrader's Execute (configured as ``c.Execute``), except that when a cell kills the kernel,
    that cell gets an error output, a new kernel replays the code cells above it (skipping cells
    that killed the kernel or timed out) and execution goes on with the next cell. Without this,
    one ``os._exit`` leaves a student's whole notebook ungraded.

    A kernel that dies while starting is started again, up to ``kernel_starts`` times: with
    several graders on one machine, the ports a new kernel was given can be taken by another
    process before it binds them ("Kernel died before replying to kernel_info")."""

    max_kernel_deaths = Integer(3, help="Give up on a notebook after this many kernel deaths").tag(config=True)
    guard_hooks = Bool(True, help="Remove hooks that watch cells run before each hidden test").tag(config=True)
    audit_frames = Bool(True, help="Refuse frame access from the notebook's code (an audit hook)").tag(config=True)
    hidden_in_function = Bool(True, help="Run hidden blocks inside a function: no hidden name stays in the kernel"
                              ).tag(config=True)
    kernel_starts = Integer(3, help="Tries to start a kernel that dies while starting").tag(config=True)

    async def async_start_new_kernel_client(self):
        for attempt in range(1, self.kernel_starts + 1):
            try:
                client = await super().async_start_new_kernel_client()
                if self.guard_hooks:
                    # what a fresh kernel has hooked, its modules' digests, the audit hook installed: one request
                    self._module_prints, audit, self._hooks_allowed = await self._prints(first=True,
                                                                                         hooks_allowed="None")
                    if self._module_prints is None or audit is None or self._hooks_allowed is None:
                        self.log.warning("The course's modules could not be fingerprinted, the audit hook "
                                         "installed, or the hooks listed, in a new kernel")
                        self._module_prints, self._hooks_allowed = self._module_prints or {}, self._hooks_allowed or []
                return client
            except RuntimeError as error:    # nbclient has shut that kernel down and dropped its manager
                if attempt == self.kernel_starts:
                    raise
                self.log.warning("A new kernel died while starting (%s); starting another (try %d of %d)",
                                 error, attempt + 1, self.kernel_starts)
                self.create_kernel_manager()            # new ports
                await self.async_start_new_kernel()

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    async def async_start_new_kernel(self, early=False, **kwargs):
        """nbclient's, except that the kernel StartKernelEarly started for this very launch is taken
        instead (early=True: that early start itself)."""
        if not early:
            km = early_kernel.claim(self, kwargs)
            if km is not None:
                self.log.info(early_kernel.TAKEN)
                self.km = km
                return
        await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)     # what nbconvert's (sync) setup_kernel calls

    def preprocess(self, nb, resources=None, km=None):
        self._skip_on_replay = set()
        self._captures, self._replaced = [], []
        self._last_hidden = max((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and has_hidden_tests(c)),
                                default=None)
        nb, resources = super().preprocess(nb, resources, km)
        if self._captures:
            resources.setdefault("nbgrader", {})["hidden_test_captures"] = sorted(set(self._captures))
        if self._replaced:
            resources.setdefault("nbgrader", {})["replaced_modules"] = sorted(set(self._replaced))
        return nb, resources

    async def _prints(self, first=False, hooks_allowed=None):
        """One silent request: MODULE_GUARD's digests of the course_utils modules in the kernel, {name: digest},
        and what the audit hook refused so far (first=True: the hook is installed), each None where it cannot
        be read; with ``hooks_allowed`` (the repr of a fresh kernel's list of hooks, or "None" for that list)
        HOOK_GUARD runs in the same request: it removes every hook not in that list, and what it removed (with
        "None": the hooks there are) comes third. One request, as a round trip to the kernel costs more than
        the three checks together."""
        code = MODULE_GUARD + (AUDIT_HOOK if first and self.audit_frames else "")
        expressions = {"prints": f"_course_module_prints({first})",
                       "audit": "_course_audit_found()" if self.audit_frames else "[]"}
        if hooks_allowed is not None:       # evaluated first: the hooks as they are before the digests' imports
            code = f"{HOOK_GUARD}\ndel _course_hook_guard\n" + code
            expressions = {"found": f"_course_hook_found({hooks_allowed})", **expressions}
        msg_id = self.kc.execute(code, silent=True, store_history=False, user_expressions=expressions)
        reply = await self.async_wait_for_reply(msg_id)
        found = (reply or {}).get("content", {}).get("user_expressions", {})
        read = {}
        for key, kind in (("prints", dict), ("audit", list), ("found", list)):
            try:
                value = ast.literal_eval(found[key]["data"]["text/plain"])
                read[key] = value if isinstance(value, kind) else None
            except (KeyError, ValueError, SyntaxError):
                read[key] = None
        return (read["prints"], read["audit"]) + ((read["found"],) if hooks_allowed is not None else ())

    def _check_modules(self, when, prints, audit):
        """Compare the course_utils modules' digests ``prints`` with what the kernel started with (or first
        showed): a module replaced in sys.modules, or a function or tolerance changed in one, is recorded for
        FlagTampering, with what the audit hook refused (``audit``)."""
        if audit is None:
            self._replaced.append(f"{when}: the audit of frame access could not be read (its reader was tampered with)")
        self._replaced += [f"{when}: the notebook's code asked for frames or the object graph: {a}" for a in audit or []]
        if prints is None:
            self._replaced.append(f"{when}: the course's modules could not be checked (the check's own code "
                                  "was tampered with)")
            return
        for name, digest in prints.items():
            known = self._module_prints.setdefault(name, digest)
            if digest != known:
                self._replaced.append(f"{when}: {name} was replaced or changed"
                                      + (f" ({digest})" if digest.startswith("not a module") else ""))
        for name in self._module_prints.keys() - prints.keys():
            self._replaced.append(f"{when}: {name} was removed from sys.modules")

    def preprocess_cell(self, cell, resources, index):
        hidden = cell.cell_type == "code" and has_hidden_tests(cell)
        where = cell.metadata.get("nbgrader", {}).get("grade_id", f"#{index}")
        guarded = self.guard_hooks and hidden and getattr(self, "kc", None) is not None
        if guarded:     # hooks, modules and frame access in one request: what the cells before this one did
            prints, audit, found = run_sync(self._prints)(hooks_allowed=repr(self._hooks_allowed))
            if found is None:
                found = ["the kernel's hooks could not be checked (the check's own code was tampered with)"]
            if found:
                self._captures += [f"before cell {where}: {what}" for what in found]
            self._check_modules(f"before cell {where}", prints, audit)
        try:
            return self._run_hidden_in_function(cell, resources, index) if hidden \
                else super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            if len(self._skip_on_replay) >= self.max_kernel_deaths:
                raise
            self.log.warning("The kernel died in cell %d; restarting it and replaying the cells above", index)
            ename, evalue = KERNEL_DIED
            cell.outputs = [NotebookNode(output_type="error", ename=ename, evalue=evalue,
                                         traceback=[f"{ename}: {evalue}"])]
            self._skip_on_replay.add(index)
            self._restart_and_replay(index)
            return cell, self.resources
        finally:
            # what a student's function called by a hidden test did shows before the next hidden cell; after
            # the last, here
            if guarded and index == self._last_hidden and getattr(self, "kc", None) is not None \
                    and index not in self._skip_on_replay:
                self._check_modules(f"after cell {where}", *run_sync(self._prints)())

    def _run_hidden_in_function(self, cell, resources, index):
        """Execute ``cell`` with its hidden blocks inside a function (``hidden_in_function``); the cell
        keeps its own source."""
        source = cell.source
        cell.source = hidden_in_function(source) if self.hidden_in_function else source
        try:
            return super().preprocess_cell(cell, resources, index)
        finally:
            cell.source = source

    def _restart_and_replay(self, upto):
        self._cleanup_kernel()
        self.km = self.create_kernel_manager()
        self.start_new_kernel()
        self.start_new_kernel_client()
        for i, cell in enumerate(self.nb.cells[:upto]):
            timed_out = any(o.get("ename") in ("CellTimeoutError", "KeyboardInterrupt")
                            for o in cell.get("outputs", []))
            if cell.cell_type == "code" and i not in self._skip_on_replay and not timed_out:
                try:
                    replayed = copy.deepcopy(cell)
                    replayed.source = hidden_in_function(replayed.source) if self.hidden_in_function else replayed.source
                    self.execute_cell(replayed, i, store_history=False)
                except DeadKernelError:      # died again on replay: skip that cell from now on
                    self._skip_on_replay.add(i)
                    if len(self._skip_on_replay) >= self.max_kernel_deaths:
                        raise
                    return self._restart_and_replay(upto)


# -- tampering with the checks ---------------------------------------------------------------------

_SUSPECT_CALLS = {"setattr", "delattr", "exec", "eval", "compile", "globals", "vars", "__import__"}
_SUSPECT_ATTRS = {"__setattr__", "__delattr__", "__dict__", "__code__", "__globals__", "__builtins__",
                  "__defaults__", "__kwdefaults__", "__class__", "__closure__",
                  # frames: a function that walks up to its caller could read a check's expected value
                  "f_locals", "f_globals", "f_back", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame"}
# what no answer needs: the modules a kernel has loaded, its frames, the objects the garbage collector tracks
_SUSPECT_NAMES = {"sys.modules", "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile",
                  "sys.addaudithook", "inspect.currentframe", "inspect.stack", "inspect.trace",
                  "inspect.getouterframes", "inspect.getinnerframes", "traceback.walk_stack",
                  "gc.get_referrers", "gc.get_referents", "gc.get_objects", "threading.settrace",
                  "threading.setprofile"}


def _root(node):
    """`a` for the expressions a, a.b.c, a[0].b, a.b(...)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(targets):
    """The names, attributes and subscripts that an assignment binds (tuples unpacked)."""
    for t in targets:
        if isinstance(t, (ast.Tuple, ast.List)):
            yield from _targets(t.elts)
        elif isinstance(t, ast.Starred):
            yield from _targets([t.value])
        else:
            yield t


def _imports(tree):
    """{name: what it is bound to} for every import in ``tree``."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                bound[name] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{'.' * node.level}{node.module}.{alias.name}"
    return bound


def _parse(source):
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        source = TransformerManager().transform_cell(source)     # %magics -> plain Python
    except Exception:  # noqa: BLE001 -- without IPython, parse the cell as it is
        pass
    try:
        return ast.parse(source)
    except SyntaxError:
        return None                 # does not run either: nothing to tamper with


def tampering(cells):
    """Reasons to distrust a notebook's automatic grades: code in the cells a student may edit
    that rebinds a name the read-only cells import (e.g. ``assert_close``), assigns to an
    attribute of a module (``torch.allclose = ...``) or of a read-only name, or reaches for
    setattr / exec / globals and the like. Returns a list of "cell <id>, line <n>: <what>"."""
    protected = {}
    for cell in cells:
        if cell.cell_type == "code" and is_locked(cell):
            tree = _parse(cell.source)
            if tree is not None:
                protected.update(_imports(tree))
    reasons = []
    for index, cell in enumerate(cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or is_locked(cell):
            continue
        tree = _parse(cell.source)
        if tree is None:
            continue
        modules = {**protected, **_imports(tree)}
        where = meta.get("grade_id") or f"#{index}"

        def flag(node, what):
            reasons.append(f"cell {where}, line {getattr(node, 'lineno', '?')}: {what}")

        top_level = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name, target in _imports(ast.Module(body=[node], type_ignores=[])).items():
                    if name in protected and protected[name] != target:
                        flag(node, f"rebinds `{name}` by an import")
                    if target in _SUSPECT_NAMES:
                        flag(node, f"imports `{target}`")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and f"{modules.get(node.value.id)}.{node.attr}" in _SUSPECT_NAMES:
                flag(node, f"uses `{modules[node.value.id]}.{node.attr}`")
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.For,
                                   ast.With, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else
                           [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) else
                           [i.optional_vars for i in node.items if i.optional_vars] if isinstance(node, ast.With)
                           else [])
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    if id(node) in top_level and node.name in protected:
                        flag(node, f"redefines `{node.name}`")
                for t in _targets(targets):
                    if isinstance(t, ast.Name) and t.id in protected and id(node) in top_level:
                        flag(node, f"rebinds `{t.id}`")
                    elif isinstance(t, (ast.Attribute, ast.Subscript)) and _root(t) in modules:
                        flag(node, f"changes `{ast.unparse(t)}`")
            elif isinstance(node, ast.Global):
                for name in node.names:
                    if name in protected:
                        flag(node, f"declares `global {name}`")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in _SUSPECT_CALLS:
                flag(node, f"calls `{node.func.id}`")
            elif isinstance(node, ast.Attribute) and node.attr in _SUSPECT_ATTRS:
                flag(node, f"uses `{node.attr}`")
            elif isinstance(node, ast.Name) and node.id == "__builtins__":
                flag(node, "uses `__builtins__`")
            elif isinstance(node, (ast.Name, ast.Attribute)) and \
                    (node.id if isinstance(node, ast.Name) else node.attr).startswith("_course_"):
                flag(node, "uses the grader's own names (`_course_...`)")
            elif isinstance(node, ast.NamedExpr) and node.target.id in protected:
                flag(node, f"rebinds `{node.target.id}`")
    return reasons


QUOTED = "[output removed by the grader: it quoted a hidden test]"


def _texts(output):
    """The text fields of an output: (container, key) pairs whose value is a str or list of str."""
    if "text" in output:
        yield output, "text"
    for mime, value in output.get("data", {}).items():
        if isinstance(value, (str, list)):
            yield output["data"], mime
    for key in ("evalue", "traceback", "ename"):
        if key in output:
            yield output, key


def quoted_hidden_tests(cells):
    """Blank every output that quotes a line of a hidden test (a submission that captured the
    hidden tests as they ran, printed them or planted them in an error) and return the reasons.
    Only a cell's own hidden tests may appear, in the traceback of its own error (nbgrader's
    autograded notebook, for the TA; feedback drops tracebacks: HideTestCode)."""
    hidden = {i: hidden_lines(c) for i, c in enumerate(cells) if c.cell_type == "code" and has_hidden_tests(c)}
    visible = "\n".join(line for c in cells for line in hidden_lines(c, shortest=0, hidden=False))
    everything = {line for lines in hidden.values() for line in lines if line not in visible}   # seen, so no secret
    reasons = []
    for index, cell in enumerate(cells):
        for output in cell.get("outputs", []):
            for holder, key in _texts(output):
                value = holder[key]
                text = "\n".join(value) if isinstance(value, list) else value
                own = hidden.get(index, ()) if key == "traceback" else ()
                # its own lines, and another cell's line that one of them contains (a traceback shows the whole line)
                allowed = {line for line in everything if any(line in mine for mine in own)}
                quoted = [line for line in everything - allowed if line in text]
                if quoted:
                    holder[key] = [QUOTED] if isinstance(value, list) else QUOTED
                    where = cell.metadata.get("nbgrader", {}).get("grade_id") or f"#{index}"
                    reasons.append(f"cell {where}: its output quoted a hidden test ({quoted[0][:40]!r}...)")
    return reasons


class StartKernelEarly(NbGraderPreprocessor):
    """Sanitize preprocessor: start the kernel Execute will run this notebook in (course_staff/grading/early_kernel.py)."""

    def preprocess(self, nb, resources):
        converter = getattr(self.parent, "parent", None)        # exporter -> nbgrader's Autograde converter
        if not hasattr(converter, "_format_dest"):
            return nb, resources

        info = resources["nbgrader"]
        notebook = os.path.join(converter._format_dest(info["assignment"], info["student"]),
                                f"{info['notebook']}.ipynb")   # where Execute will read it (write_single_notebook)
        folder = os.path.split(notebook)[0]
        converter.writer._makedir(folder)       # as the writer makes it next (a lab of notebooks only: not yet)
        named = NotebookNode(metadata=copy.deepcopy(nb.metadata), cells=[])
        OverwriteKernelspec(parent=self.parent).preprocess(named, resources)   # the kernel's name, as it will be
        client = SurviveKernelDeath(parent=self.parent)
        NotebookClient.__init__(client, named, None)    # as Execute.preprocess sets itself up (config applied)
        client._check_assign_resources({"metadata": {"path": folder}})
        client.km = client.create_kernel_manager()
        early_kernel.start(client)
        return nb, resources


class FlagTampering(NbGraderPreprocessor):
    """Autograde, after SaveAutoGrades: a notebook whose editable cells tamper with the checks
    (see ``tampering``) gets 0 on every check cell, each marked "needs manual grade", and the
    reasons as the comment of its first solution cell. A TA reviews it in the formgrader: a
    manual score replaces the 0. Written answers, graded by hand anyway, are left as they are."""

    scan_outputs = Bool(True, help="Blank outputs that quote a hidden test (and hold the notebook at 0)").tag(config=True)

    def preprocess(self, nb, resources):
        reasons = tampering(nb.cells) + (quoted_hidden_tests(nb.cells) if self.scan_outputs else []) \
            + [f"hooks that watch cells run, removed {c}" for c in resources["nbgrader"].get("hidden_test_captures", [])]\
            + [f"the course's modules, {c}" for c in resources["nbgrader"].get("replaced_modules", [])]
        if not reasons:
            return nb, resources
        info = resources["nbgrader"]
        student, lab, notebook = info["student"], info["assignment"], info["notebook"]
        self.log.warning("%s %s / %s: the checks may have been tampered with; every graded cell is 0 "
                         "until a TA reviews it:\n  %s", TAMPER_ALARM, student, lab, "\n  ".join(reasons))
        comment = f"{WITHHELD}: " + "; ".join(reasons)
        with Gradebook(info["db_url"]) as gb:
            for cell in nb.cells:
                if is_grade(cell) and not is_written_answer(cell):
                    grade = gb.find_grade(cell.metadata.nbgrader["grade_id"], notebook, lab, student)
                    grade.auto_score = 0.0
                    grade.needs_manual_grade = True
            for cell in nb.cells:
                if is_solution(cell):
                    gb.find_comment(cell.metadata.nbgrader["grade_id"], notebook, lab, student).auto_comment = comment
                    break
            gb.db.commit()
        return nb, resources


class FlagWrittenAnswers(NbGraderPreprocessor):
    """Autograde, after SaveAutoGrades: mark every written answer "needs manual grade".

    nbgrader leaves an answered cell to a human (no automatic score), but gives a blank one (the
    release's stub, unchanged) 0 and considers it graded. Here a blank answer keeps its 0 and is
    flagged as well, so that the formgrader lists every submission whose written answers no TA has
    read yet: a student who answered in another cell, or deleted the stub, is not lost. A cell that
    a TA has already scored (a manual score) is left alone."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        answers = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if is_written_answer(c)]
        if not answers:
            return nb, resources
        with Gradebook(info["db_url"]) as gb:
            for grade_id in answers:
                grade = gb.find_grade(grade_id, info["notebook"], info["assignment"], info["student"])
                if grade.manual_score is None:
                    grade.needs_manual_grade = True
            gb.db.commit()
        return nb, resources


class ReportNotebookProblems(NbGraderPreprocessor):
    """Autograde, the first sanitize step (before outputs are cleared and duplicate ids dropped): the
    problems ``course_utils.notebook_problems`` finds in the submitted file, logged as one line per
    student and put at the top of the graded notebook as a markdown cell (no nbgrader metadata, so
    it grades nothing), which the feedback shows with each problem's repair.

    Two problems that make nbgrader 0.9 fail the whole notebook with a KeyError are repaired first,
    so that the student's work is graded: a pasted cell (two cells with one grade id: the copy that
    holds the student's work keeps the id, see ``keep_one_copy``) and a notebook whose nbgrader
    metadata an editor dropped (given back from the release, see ``restore_metadata``)."""

    def preprocess(self, nb, resources):
        from course_utils.notebook_problems import problems

        info = resources["nbgrader"]
        found = problems(f"{info['notebook']}.ipynb", nb=nb)
        if not found:
            return nb, resources
        done = []
        if any(p.fatal for p in found):          # the metadata is gone
            release = self._release(info)
            if release is not None:
                unplaced = restore_metadata(nb, release)
                done.append("the metadata was given back from the release to grade it" +
                            (f" (no cell found for the written answer {', '.join(unplaced)}: it reads as blank, "
                             "look for it in the notebook)" if unplaced else ""))
        if keep_one_copy(nb):
            done.append("only one copy of each pasted cell was graded")
        self.log.warning("%s %s / %s: %s", NOTEBOOK_PROBLEM, info["student"], info["assignment"],
                         "; ".join([p.what for p in found] + done))
        note = ("**Problems the graders found in this notebook** (fix them before you submit again):\n\n"
                + "\n".join(f"- {p.what}: {p.repair}." for p in found)
                + "".join(f"\n\n(Graded anyway: {d}.)" for d in done))
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(note))
        return nb, resources

    def _release(self, info):
        from pathlib import Path

        course = self.config.CourseDirectory
        root = Path(course.get("root") or ".")
        path = root / (course.get("release_directory") or "release") / info["assignment"] / f"{info['notebook']}.ipynb"
        return nbformat.read(str(path), as_version=4) if path.exists() else None


def keep_one_copy(nb):
    """Leave the nbgrader metadata on one cell per grade id: the last copy, as nbgrader grades it, unless
    that one is still the release's (its checksum unchanged) and an earlier copy is not. The other
    copies stay as plain cells. Returns the grade ids that had copies."""
    copies = {}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid:
            copies.setdefault(gid, []).append(cell)
    pasted = [gid for gid, cells in copies.items() if len(cells) > 1]
    for gid in pasted:
        cells = copies[gid]
        changed = [c for c in cells if c.metadata.nbgrader.get("checksum") != utils.compute_checksum(c)]
        keep = changed[-1] if is_solution(cells[-1]) and changed and cells[-1] not in changed else cells[-1]
        for cell in cells:
            if cell is not keep:
                cell.metadata.pop("nbgrader")
    return pasted


def restore_metadata(nb, release):
    """Give the cells of a notebook that lost its nbgrader metadata the metadata of the release's
    cells they are: each read-only cell by its text (the first cell, after the one matched before,
    whose text is the release's), each answer cell by its place, when the cells between two matched
    read-only cells hold exactly as many unmarked cells of its type as the release has answers
    there. Returns the grade ids of the written answers it could not place (nbgrader adds those
    back blank; an unplaced code answer still runs as a plain cell, and its checks grade it)."""
    marked = [c for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id")]
    anchors, start = [], 0
    for k, cell in enumerate(marked):
        if is_locked(cell) and not is_solution(cell):
            for j in range(start, len(nb.cells)):
                if nb.cells[j].cell_type == cell.cell_type and nb.cells[j].source.strip() == cell.source.strip():
                    nb.cells[j].metadata["nbgrader"] = copy.deepcopy(cell.metadata.nbgrader)
                    anchors.append((k, j))
                    start = j + 1
                    break
    unplaced = []
    bounds = [(-1, -1)] + anchors + [(len(marked), len(nb.cells))]
    for (k0, j0), (k1, j1) in zip(bounds, bounds[1:]):
        for kind in ("code", "markdown"):
            wanted = [c for c in marked[k0 + 1:k1] if is_solution(c) and c.cell_type == kind]
            have = [c for c in nb.cells[j0 + 1:j1] if c.cell_type == kind and "nbgrader" not in c.metadata]
            if len(wanted) != len(have):
                unplaced += [c.metadata.nbgrader["grade_id"] for c in wanted if is_grade(c)]
                continue
            for answer, cell in zip(wanted, have):
                cell.metadata["nbgrader"] = copy.deepcopy(answer.metadata.nbgrader)
    return unplaced


class RestoreReadOnlyCells(OverwriteCells):
    """nbgrader's OverwriteCells (restores read-only cells, cell types and points from the
    gradebook), with a log that tells honest submissions from edited ones.

    A test cell reaches students without its hidden tests, so its checksum never matches the
    gradebook's, and nbgrader warns "Attribute 'checksum' for cell ... has changed!" for every
    test cell of every honest submission. Here a cell that is exactly what the release carries is
    restored silently; any other change is logged under TAMPER_ALARM with the student's name."""

    def preprocess(self, nb, resources):
        self._who = "{student} / {assignment}".format(**resources["nbgrader"])
        return super().preprocess(nb, resources)

    def add_missing_grade_cells(self, nb, resources):
        """nbgrader's, except that a missing grade cell goes after the nearest cell before it in the
        source notebook that the submission still has. (nbgrader looks only at the cell right before
        it and fails with a KeyError when that one is a read-only text cell: a deleted written answer.)"""
        source = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = [c.name for c in source.source_cells]
        by_name = {c.name: c for c in source.source_cells}
        solutions = {c.name for c in source.solution_cells}
        for graded in source.grade_cells:
            present = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
            if graded.name in present:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", graded.name)
            before = order[:order.index(graded.name)]
            at = next((present.index(g) + 1 for g in reversed(before) if g in present), 0)
            nb.cells.insert(at, self.missing_cell_transform(by_name[graded.name], graded.max_score,
                                                            is_solution=graded.name in solutions))
        return nb, resources

    def report_change(self, name, attr, old, new):
        if attr == "checksum" and new == self._released_checksum(name):
            self.log.debug("%s: cell %s is the released one (hidden tests restored)", self._who, name)
            return
        change = "code was edited" if attr == "checksum" else f"{attr} was changed from {old} to {new}"
        self.log.warning("%s %s: the read-only cell %s: its %s; the original was restored before "
                         "grading", TAMPER_ALARM, self._who, name, change)

    def _released_checksum(self, name):
        """The checksum of cell ``name`` as generate_assignment released it: the gradebook's source
        with its hidden tests cleared."""
        source = self.gradebook.find_source_cell(name, self.notebook_id, self.assignment_id)
        meta = {"grade_id": name, "locked": source.locked, "solution": False, "grade": False}
        try:
            graded = self.gradebook.find_graded_cell(name, self.notebook_id, self.assignment_id)
            meta.update(grade=True, points=float(graded.max_score))
        except MissingEntry:
            pass
        cell = nbformat.from_dict({"cell_type": source.cell_type, "source": source.source,
                                   "metadata": {"nbgrader": meta}})
        ClearHiddenTests().preprocess_cell(cell, {}, 0)
        return utils.compute_checksum(cell)


def check_config(path="nbgrader_config.py"):
    """Load an nbgrader config file as nbgrader would, but let any error stop the process.

    nbgrader itself only logs "Exception while loading config file" (a syntax error, say) and goes on
    with a partial configuration, and only warns about outdated names (``CollectApp.check_owner``
    for ``ExchangeCollect.check_owner``); the Makefile's TA targets run this first.
    """
    loaded = config(path)
    outdated = outdated_names(loaded)
    if outdated:
        raise SystemExit(f"{path} uses names that nbgrader has renamed (it would only warn and "
                         "carry on):\n  " + "\n  ".join(outdated))
    return loaded


def outdated_names(config):
    """nbgrader's own warnings about outdated names in ``config``: every nbgrader application,
    converter and exchange class that renames a section or option is asked to load a copy."""
    import logging

    import nbgrader.apps
    import nbgrader.converters
    import nbgrader.exchange.default

    class Collect(logging.Handler):
        def emit(self, record):
            message = " ".join(record.getMessage().split())
            if "Outdated config" in message or "in config, not" in message:
                found.append(message)

    classes = {cls for module in (nbgrader.apps, nbgrader.converters, nbgrader.exchange.default)
               for cls in vars(module).values()
               if isinstance(cls, type) and "_load_config" in vars(cls)}
    found = []
    for cls in classes:
        instance = cls()
        log = instance.log
        handlers, log.handlers = log.handlers, [Collect()]     # collected, not printed
        try:
            instance._load_config(copy.deepcopy(config))
        finally:
            log.handlers = handlers
    return sorted(set(found))


if __name__ == "__main__":
    import sys

    check_config(*sys.argv[1:])
    print("nbgrader_config.py loads cleanly")
