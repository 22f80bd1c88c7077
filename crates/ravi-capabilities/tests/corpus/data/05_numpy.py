# numpy: 64-bit sums, linear algebra, a seeded generator, vectorised statistics.
import numpy as np

print(np.arange(100_000).sum(), np.arange(1, 21).prod())
print(np.array([2_000_000_000, 2_000_000_000]).sum())
a = np.array([[3.0, 1.0], [1.0, 2.0]])
print(np.linalg.solve(a, np.array([9.0, 8.0])))
print(np.round(np.linalg.eigvalsh(a), 6))
rng = np.random.default_rng(42)
x = rng.normal(10, 2, 1000)
print(round(float(x.mean()), 6), round(float(x.std()), 6))
print(np.percentile(x, [5, 50, 95]).round(4))
print(np.histogram(x, bins=5)[0])
m = np.linspace(0, 1, 12).reshape(3, 4)
print(m.T @ m)
