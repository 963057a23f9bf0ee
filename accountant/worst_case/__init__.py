"""The exact worst cases: the blanket family F(a) and its per-k certificates (family.py) and the
exhaustive k = 3 search (k3_exhaustive.py). They are bounds built on the engines.
"""
