"""The accountant's engines: log-space numerics (numerics.py), the one eps(delta) crossing search
(crossing.py), pair divergences of the shuffled outputs (pairs.py), the G sums (gsum.py,
gsum_fast.py), F(a) for every a (family_counts.py) and the k = 2 methods (k2_exact.py,
k2_contour.py, k2_fft.py, k2_waves.py).

Pure computation on numbers and the mechanism: nothing here imports a ``Bound``
(tests/unit/test_layers.py checks it).
"""
