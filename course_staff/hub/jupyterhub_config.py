"""JupyterHub's configuration for the course's local hub (`make hub`), read from hub.json.

`python -m course_staff.hub start` writes ROOT/hub/hub.json and starts
`jupyterhub -f <this file>` (the course's .venv, as root) with COURSE_HUB_STATE naming it. Everything a user's server needs
comes from the environment set here (``server_environment``): the servers' Python (ROOT/env), the
Jupyter config of the user's role (ROOT/etc/student or ROOT/etc/instructor, then ROOT/etc/common)
and, for the instructor only, the exchange and the gradebook's URL.
"""

import json
import os

from course_staff.hub import server_environment

state = json.load(open(os.environ["COURSE_HUB_STATE"]))
c = get_config()  # noqa: F821  (provided by traitlets)

# -- the hub and its proxy, on loopback ports of their own
c.JupyterHub.bind_url = state["url"] + "/"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = state["hub_port"]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{state['proxy_api_port']}"
# the proxy runs on its own, started (and waited for) by `start`: the hub would give it 10 s, which a
# loaded machine's Node.js can miss; its token comes in CONFIGPROXY_AUTH_TOKEN
c.ConfigurableHTTPProxy.should_start = False
c.JupyterHub.cookie_secret_file = os.path.join(state["hub_dir"], "cookie_secret")
c.JupyterHub.db_url = state["hub_db_url"]           # the hub's own tables, on the same PostgreSQL
c.JupyterHub.cleanup_servers = True                 # stopping the hub stops every user's server

# -- who logs in: the Unix users `start` made, with their passwords (PAM)
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = set([state["instructor"], *state["students"]])
c.Authenticator.admin_users = {state["instructor"]}

# -- each user's JupyterLab runs as that user, from the servers' Python
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [os.path.join(state["env"], "bin", "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.Spawner.args = ["--ServerApp.terminals_enabled=True"]


def role_environment(spawner):
    spawner.environment.update(server_environment(state, spawner.user.name))


c.Spawner.pre_spawn_hook = role_environment
