"""Every graded notebook runs in a bubblewrap sandbox: the kernel a student's code runs in sees
the system, the venv and the course package read-only, a private copy of its own folder (its
notebooks left out) and a private /tmp, and nothing else of the course; it has no network, no
secret in its environment and limits on CPU time, memory, processes and file size.

    c.Execute.kernel_manager_class = "course_staff.grading.sandbox.SandboxedKernelManager"   # nbgrader_config.py
    SANDBOX=off nbgrader autograde lab11      # the TA's explicit opt-out: warned on every run
    python -m course_staff.grading.sandbox    # is it on here? (starts one sandbox, prints its view)

How the kernel is started (``bwrap_command``):

    bwrap --unshare-all --die-with-parent --clearenv --setenv ... \\
          --bind <jail>/tmp /tmp --ro-bind /usr /usr ... --ro-bind <venv> <venv> \\
          --ro-bind <course_utils> <course_utils> --proc /proc --dev /dev --bind <jail>/conn /run/kernel \\
          --bind <jail>/work <cwd> \\
          --chdir <cwd> -- python -c <set limits, exec> python -m ipykernel_launcher -f /run/kernel/kernel-inside.json

- ``--unshare-all``: its own network namespace (only a loopback of its own: the grader's
  127.0.0.1 is out of reach), its own PID, IPC, UTS and user namespaces;
- the kernel talks to nbgrader over IPC sockets (``transport = "ipc"``) in <jail>/conn, the one
  folder both see (the kernel at /run/kernel); no TCP port is opened at all;
- the kernel's working folder is a private copy of the folder nbgrader runs the notebook in, without
  its notebooks (nbgrader has restored their hidden tests there): what the student's code writes
  there is thrown away, the autograded notebook and the scores are written by nbgrader outside
  from the kernel's messages, as without the sandbox;
- limits are set inside the sandbox, after the user namespace exists (``_LIMITS``): so
  RLIMIT_NPROC counts this sandbox's processes only. Run as root, the kernel runs as a uid of
  its own (``sandbox_uid``): Linux does not apply RLIMIT_NPROC to uid 0.

No silent fallback: a kernel that cannot be sandboxed is not started (``SandboxError``, with how
to install bubblewrap). SANDBOX=off (``enabled()``) is the explicit opt-out; ``warn_if_off``
prints its warning.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from queue import Empty

from traitlets import DottedObjectName, Integer, Type, Unicode, default

from course_utils import parallel
from course_utils.kernel_client import SteadyKernelClient, SteadyKernelManager

INSTALL = ("install bubblewrap (as root: `make sandbox-install`, or `apt-get install bubblewrap`; "
           "its user namespaces must be allowed: sysctl kernel.unprivileged_userns_clone=1 where that "
           "exists). To grade WITHOUT a sandbox, at your own risk: SANDBOX=off")
OFF_WARNING = ("WARNING: SANDBOX=off: student code runs UNSANDBOXED, as you, with your files, your "
               "environment and your network (docs/ta_guide.md, 'The grading sandbox')")
# variables a kernel may see (values from the grader's environment where set); everything else,
# NBGRADER_DB_URL and any token or password included, is left out
PASSED_ENV = ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
              "PYTHONHASHSEED", "PYTHONWARNINGS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "OPENBLAS_NUM_THREADS", "ATEN_CPU_CAPABILITY", "MPLBACKEND", "JPY_PARENT_PID",
              "JPY_SESSION_NAME", "PYDEVD_DISABLE_FILE_VALIDATION")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
          "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
          "/etc/fonts", "/etc/localtime", "/etc/mime.types", "/etc/ssl/certs",
          "/sys/devices/system/cpu")
CONN = "/run/kernel"        # <jail>/conn as the kernel sees it: its connection file and IPC sockets
UID_BASE = 1_500_000        # run as root, each kernel gets a uid of its own from here (see sandbox_uid)
# run inside the sandbox before the kernel: the limits, the uid (root only), then exec the kernel
_LIMITS = ("import os, resource, sys\n"
           "for name, value in {limits!r}.items():\n"
           "    resource.setrlimit(getattr(resource, name), (value, value))\n"
           "if {uid!r}:\n"
           "    os.setgroups([]); os.setresgid({uid!r}, {uid!r}, {uid!r}); os.setresuid({uid!r}, {uid!r}, {uid!r})\n"
           "os.execv(sys.argv[1], sys.argv[1:])\n")


class SandboxError(RuntimeError):
    """The sandbox cannot start here: grading stops (no silent fallback)."""


def enabled(environ=os.environ):
    """False only where the TA opted out explicitly: SANDBOX=off (or 0, no, false)."""
    return environ.get("SANDBOX", "on").strip().lower() not in ("off", "0", "no", "false")


def warn_if_off(stream=None):
    """Print the opt-out's warning (to stderr) when SANDBOX=off; returns whether it did."""
    if enabled():
        return False
    print(OFF_WARNING, file=stream or sys.stderr, flush=True)
    return True


def bwrap():
    """The bwrap executable, or SandboxError saying how to install it."""
    found = shutil.which("bwrap") or next((p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(p, os.X_OK)), None)
    if not sys.platform.startswith("linux"):
        raise SandboxError(f"the grading sandbox needs Linux (this is {sys.platform}): grade on a Linux "
                           f"machine, or {INSTALL}")
    if not found:
        raise SandboxError(f"bubblewrap (bwrap) is not installed: {INSTALL}")
    return found


def package_dir(name):
    """The folder of an importable package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SandboxError(f"cannot find the package {name}")
    return str(Path(list(spec.submodule_search_locations)[0]).resolve())


def readonly_paths():
    """What the kernel may read: the system, Python (base and venv) and the course package."""
    paths = [p for p in SYSTEM if os.path.lexists(p)]
    paths += [str(Path(sys.base_prefix).resolve()), sys.prefix, str(Path(sys.prefix).resolve()),
              sysconfig.get_paths()["purelib"], package_dir("course_utils")]
    seen, out = set(), []
    for p in paths:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def sandbox_uid():
    """The uid (also its gid) the kernel runs as when the grader is root, else None (the grader's own).

    Linux never applies RLIMIT_NPROC to uid 0, and root reads every file: a kernel of a root
    grader runs as a uid of its own, unused by anyone (UID_BASE + a random offset), so that its
    process limit counts its own processes only. bwrap then runs as root without a user
    namespace (bwrap cannot map a uid other than the caller's) and the kernel drops to that uid
    before it starts, keeping no capability."""
    if os.geteuid() != 0:
        return None
    return UID_BASE + int.from_bytes(os.urandom(3), "big")


def bwrap_command(kernel_cmd, env, cwd, jail, limits, uid=None):
    """The command that starts ``kernel_cmd`` (a list) in the sandbox: ``cwd`` is bound from
    <jail>/work, /tmp from <jail>/tmp, <jail>/conn at its own path; ``env`` filtered to
    PASSED_ENV; ``limits`` {RLIMIT_name: value} set inside; ``uid``: see sandbox_uid. Pure:
    nothing is started."""
    jail = Path(jail)
    if uid:     # root: every namespace but the user's; the launcher drops to ``uid``
        isolate = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                   "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        isolate = ["--unshare-all"]
    args = [bwrap(), *isolate, "--die-with-parent", "--new-session", "--clearenv"]
    home = "/tmp/home"
    settings = {name: env[name] for name in PASSED_ENV if name in env}
    settings.update(PATH=f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", HOME=home,
                    TMPDIR="/tmp", MPLCONFIGDIR="/tmp/matplotlib", IPYTHONDIR="/tmp/ipython",
                    JUPYTER_RUNTIME_DIR="/tmp/jupyter", XDG_CACHE_HOME="/tmp/cache",
                    PYTHONDONTWRITEBYTECODE="1",
                    **{parallel.ENV: "1"})     # one worker: a graded kernel trains its runs one after another
    for name, value in settings.items():
        args += ["--setenv", name, value]
    readonly = [p for p in readonly_paths() if os.path.exists(p) or os.path.islink(p)]
    writable = [(str(jail / "conn"), CONN), (str(jail / "work"), str(cwd))]
    # the private /tmp first: a venv or a course that lives under the grader's /tmp is bound over it
    args += ["--bind", str(jail / "tmp"), "/tmp"]
    args += _parents([*readonly, *(dest for _, dest in writable)])
    for path in readonly:
        args += ["--ro-bind-try", path, path]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for source, dest in writable:
        args += ["--bind", source, dest]
    args += ["--chdir", str(cwd)]
    python = kernel_cmd[0] if Path(kernel_cmd[0]).name.startswith("python") else sys.executable
    kernel_cmd = [a.replace(str(jail / "conn"), CONN) for a in kernel_cmd]     # -f <connection file>
    return [*args, "--", python, "-c", _LIMITS.format(limits=dict(limits), uid=uid), *kernel_cmd]


def _parents(destinations):
    """bwrap arguments that create the folders above each mount point, readable by all (bwrap
    would make them 0700, closing /root/... to a kernel that does not run as root)."""
    destinations = set(destinations)
    above = {str(parent) for d in destinations for parent in Path(d).parents if str(parent) not in ("/", "/tmp")}
    args = []
    for folder in sorted(above - destinations, key=lambda p: p.count("/")):
        if not any(folder.startswith(d + "/") for d in destinations):
            args += ["--perms", "0755", "--dir", folder]
    return args


def _seed_tmp(tmp):
    """<jail>/tmp with matplotlib's font cache copied from the grader's (building it takes seconds)."""
    for sub in ("home", "matplotlib", "ipython", "jupyter", "cache"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("MPLCONFIGDIR") or Path(os.environ.get("XDG_CACHE_HOME") or
                                                         Path.home() / ".cache") / "matplotlib")
    if not any(cache.glob("fontlist-*.json")):     # built once, here: in the kernel its notice is stderr
        subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], capture_output=True, timeout=300)
    for fontlist in cache.glob("fontlist-*.json"):
        shutil.copy2(fontlist, tmp / "matplotlib" / fontlist.name)


def make_jail(cwd, owner=None):
    """A private folder: work/ (a copy of ``cwd`` without its notebooks), tmp/ and conn/, all owned by
    ``owner`` (a uid or None). The notebooks nbgrader grades in ``cwd`` hold the hidden tests it restored
    from the gradebook; the kernel runs their cells and never needs their files."""
    jail = Path(tempfile.mkdtemp(prefix="grading-sandbox-"))
    os.chmod(jail, 0o711)
    if cwd and Path(cwd).is_dir():
        shutil.copytree(cwd, jail / "work", symlinks=True, ignore=shutil.ignore_patterns("*.ipynb"))
    else:
        (jail / "work").mkdir()
    (jail / "conn").mkdir()
    _seed_tmp(jail / "tmp")
    if owner:
        for root, dirs, files in os.walk(jail):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(root, name), owner, owner)
        os.lchown(jail, owner, owner)
    return jail


class GraderKernelClient(SteadyKernelClient):
    """SteadyKernelClient that is ready as soon as the kernel has answered a kernel_info request on the
    shell channel and gone idle after it on IOPub (both channels work, the request's output is in).
    jupyter_client's wait_for_ready then listens to IOPub until it has been silent for 0.2 s: a fixed
    0.2 s of every graded notebook's ~0.5 s kernel start. As there, a request whose IOPub messages do
    not come within IOPUB_WAIT_S (a subscription not yet made) is sent again."""

    async def _async_wait_for_ready(self, timeout=None):
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        sent = set()                # kernel_info requests: an answer to any of them will do
        while True:
            sent.add(self.kernel_info())
            reply = await self._reply_to(sent, "shell", 1)
            if reply is not None and await self._idle_after(sent):
                self._handle_kernel_info_reply(reply)
                return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    wait_for_ready = _async_wait_for_ready

    async def _reply_to(self, sent, channel, wait):
        """The first message on ``channel`` answering one of ``sent`` (None after ``wait`` s of none)."""
        try:
            while True:
                msg = await getattr(self, f"{channel}_channel").get_msg(timeout=wait)
                if msg["parent_header"].get("msg_id") in sent:
                    return msg
        except Empty:
            return None

    async def _idle_after(self, sent):
        """Whether IOPub says "idle" after one of ``sent`` (no IOPub message for IOPUB_WAIT_S: False)."""
        while True:
            msg = await self._reply_to(sent, "iopub", IOPUB_WAIT_S)
            if msg is None:
                return False
            if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                return True


IOPUB_WAIT_S = 0.2      # jupyter_client's own wait for IOPub
KILL_POLL_S = 0.01      # how often a killed kernel is checked for its end (jupyter_client: 0.1 s)


class GraderKernelManager(SteadyKernelManager):
    """The grader's kernel manager (with SANDBOX=off, the kernel is not sandboxed): its clients are
    GraderKernelClients, and a killed kernel's end is noticed within KILL_POLL_S."""

    client_class = DottedObjectName("course_staff.grading.sandbox.GraderKernelClient")
    client_factory = Type(GraderKernelClient)
    early_client = None     # a client made with the kernel (course_staff/grading/early_kernel.py)

    def client(self, **kwargs):
        """The early client, once (its channels started but the heartbeat), else a new client."""
        early, self.early_client = self.early_client, None
        return early if early is not None else super().client(**kwargs)

    async def _async_wait(self, pollinterval=KILL_POLL_S):
        await super()._async_wait(pollinterval)


class SandboxedKernelManager(GraderKernelManager):
    """GraderKernelManager whose kernel runs in bubblewrap (module docstring); IPC transport."""

    cpu_seconds = Integer(1200, help="RLIMIT_CPU of the kernel: CPU seconds for a whole notebook").tag(config=True)
    memory_mb = Integer(4096, help="RLIMIT_DATA of the kernel (heap and anonymous memory), MiB").tag(config=True)
    processes = Integer(256, help="RLIMIT_NPROC: processes and threads in the sandbox").tag(config=True)
    file_mb = Integer(512, help="RLIMIT_FSIZE: the largest file the kernel may write, MiB").tag(config=True)
    _jail = Unicode("")
    _uid = None

    @default("transport")
    def _transport_default(self):
        return "ipc"

    def limits(self):
        return {"RLIMIT_CPU": self.cpu_seconds, "RLIMIT_DATA": self.memory_mb << 20,
                "RLIMIT_NPROC": self.processes, "RLIMIT_FSIZE": self.file_mb << 20,
                "RLIMIT_CORE": 0}

    async def _async_pre_start_kernel(self, **kw):
        bwrap()                                             # no bubblewrap: stop here, saying why
        self._drop_jail()                                   # a restart's: its kernel is gone
        self.transport = "ipc"
        self._uid = owner = sandbox_uid()
        self._jail = str(make_jail(kw.get("cwd"), owner))
        conn = Path(self._jail) / "conn"
        self.connection_file = str(conn / "kernel.json")
        self.ip = str(conn / "kernel")
        kernel_cmd, kw = await super()._async_pre_start_kernel(**kw)
        # the kernel's copy of the connection file: the same sockets, under the path it sees them at
        info = json.loads(Path(self.connection_file).read_text())
        info["ip"] = f"{CONN}/kernel"
        inside = conn / "kernel-inside.json"
        inside.write_text(json.dumps(info))
        kernel_cmd = [str(inside) if a == self.connection_file else a for a in kernel_cmd]
        for path in (self.connection_file, inside):
            os.chmod(path, 0o600)
            if owner:
                os.chown(path, owner, owner)
        return kernel_cmd, kw

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        cwd = kw.get("cwd") or os.getcwd()
        kernel_cmd = bwrap_command(kernel_cmd, kw.get("env") or {}, cwd, self._jail, self.limits(), self._uid)
        kw["env"] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}   # bwrap's own; --clearenv for the kernel
        kw["cwd"] = self._jail
        await super()._async_launch_kernel(kernel_cmd, **kw)

    @property
    def kernel_spec(self):
        """The kernelspec, interrupted by a message: a signal to bwrap would not reach the kernel
        (it runs in a session and PID namespace of its own)."""
        spec = super().kernel_spec
        if spec is not None:
            spec.interrupt_mode = "message"
        return spec

    async def _async_cleanup_resources(self, restart=False):
        try:
            await super()._async_cleanup_resources(restart=restart)
        finally:                    # its folder copy goes even if jupyter_client's clean-up fails
            self._drop_jail()

    cleanup_resources = _async_cleanup_resources     # what nbclient calls on a dead kernel

    def _drop_jail(self):
        if self._jail:
            shutil.rmtree(self._jail, ignore_errors=True)
            self._jail = ""


def probe():
    """Start one sandbox the way a kernel is started and return what it sees (a dict); raises
    SandboxError, with bwrap's message and how to install it, where it cannot start."""
    code = ("import json, os, resource, socket\n"
            "s = socket.socket(); s.settimeout(1)\n"
            "try:\n    s.connect(('1.1.1.1', 53)); net = True\nexcept OSError:\n    net = False\n"
            "print(json.dumps({'uid': os.getuid(), 'env': sorted(os.environ), 'network': net,\n"
            "  'nproc': resource.getrlimit(resource.RLIMIT_NPROC)[0], 'root': sorted(os.listdir('/'))}))\n")
    with tempfile.TemporaryDirectory() as cwd:
        owner = sandbox_uid()
        jail = make_jail(cwd, owner)
        try:
            cmd = bwrap_command([sys.executable, "-c", code], dict(os.environ), cwd, jail,
                                SandboxedKernelManager().limits(), owner)
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=jail,
                                  env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        finally:
            shutil.rmtree(jail, ignore_errors=True)
    if proc.returncode != 0:
        raise SandboxError(f"the grading sandbox does not start here: {proc.stderr.strip()[-500:]}\n{INSTALL}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def require():
    """For grading commands: stop with a message if the sandbox is on and cannot start; print the
    warning if it is off. Returns True when grading is sandboxed."""
    if warn_if_off():
        return False
    try:
        probe()
    except SandboxError as error:
        raise SystemExit(f"cannot grade: {error}") from None
    return True


if __name__ == "__main__":
    if warn_if_off():
        sys.exit(0)
    try:
        seen = probe()
    except SandboxError as error:
        sys.exit(str(error))
    print(f"the grading sandbox is on: kernel uid {seen['uid']}, network {'OPEN' if seen['network'] else 'none'}, "
          f"{seen['nproc']} processes at most, environment {', '.join(seen['env'])}; / holds {', '.join(seen['root'])}")
