"""Browser tests: the labs in JupyterLab, driven in headless chromium."""
