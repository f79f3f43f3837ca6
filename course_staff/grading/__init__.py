"""The TAs' tools: what nbgrader_config.py plugs into nbgrader and what `make autograde`, `make grades` run."""

import sys

# Every grading process imports nbformat, nbformat imports jsonschema, and jsonschema builds an Earley
# parser of RFC 3987 at import when the optional rfc3987_syntax is installed (jupyterlab's jupyter-events
# pulls it in): about 1.5 CPU-s per process, for the "iri" string formats that neither nbformat nor
# nbgrader ever checks (they validate without a format checker). Left out here, before jsonschema is
# imported; a process that imported jsonschema already keeps what it has.
sys.modules.setdefault("rfc3987_syntax", None)
