\set x 1 / 0
\set y :nope + 1
\set z random_gaussian(1, 10, 2.5) * least(1, 2.5)
