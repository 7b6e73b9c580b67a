"""Uses the geometry module in several places."""

from pkg.geometry import Circle, area


def report(radius: float) -> str:
    circle = Circle(radius)
    return f"area {area(circle):.2f}"


def total(radii: list[float]) -> str:
    return "héllo 😀 " + str(sum(area(Circle(r)) for r in radii))


def bigger(radius: float) -> float:
    return area(Circle(radius).scaled(2))
