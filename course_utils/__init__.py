"""The toy world of Labs 11 and 12: a tiny addition LM (tinylm), the hidden labeler and the proxy reward
model (prefs), the enumerable toys (twotoken, exact), the checks of the test cells (grading), and the
plots and sliders of each lab (lab11_views, lab12_views, exact_views)."""
