"""The staff notebook notebooks/beyond_ppo.ipynb: its methods, its experiment, the cache of its results, its views."""
