"""ATen overloads the models execute natively, replayed under device numerics against CPU
(``python -m tools.overloads``; ``make test-native-verified``)."""
