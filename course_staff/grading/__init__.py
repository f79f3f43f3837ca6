"""The TAs' tools: what nbgrader_config.py plugs into nbgrader and what `make autograde`, `make grades` run."""
