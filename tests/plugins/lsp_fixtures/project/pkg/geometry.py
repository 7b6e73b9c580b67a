"""Shapes and their areas."""

import math


class Circle:
    """A circle with a radius."""

    def __init__(self, radius: float) -> None:
        self.radius = radius

    def scaled(self, factor: float) -> "Circle":
        """A circle ``factor`` times as large."""
        return Circle(self.radius * factor)


def area(circle: Circle) -> float:
    """The area enclosed by ``circle``."""
    return math.pi * circle.radius**2
