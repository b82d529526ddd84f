"""Orders for a small shop: lines, discounts, tax and a printable receipt."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Iterable

CENT = Decimal("0.01")
TAX_RATES = {
    "standard": Decimal("0.20"),
    "reduced": Decimal("0.05"),
    "zero": Decimal("0.00"),
}


class OrderError(ValueError):
    """An order that cannot be priced: the message says which line and why."""


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    price: Decimal
    tax_band: str = "standard"

    def __post_init__(self) -> None:
        if self.price < 0:
            raise OrderError(f"{self.sku}: a price cannot be negative")
        if self.tax_band not in TAX_RATES:
            raise OrderError(f"{self.sku}: unknown tax band {self.tax_band!r}")


@dataclass
class Line:
    product: Product
    quantity: int

    @property
    def subtotal(self) -> Decimal:
        return self.product.price * self.quantity

    @property
    def tax(self) -> Decimal:
        return round_money(self.subtotal * TAX_RATES[self.product.tax_band])


@dataclass
class Discount:
    code: str
    percent: Decimal = Decimal("0")
    fixed: Decimal = Decimal("0")
    minimum_spend: Decimal = Decimal("0")

    def applies_to(self, subtotal: Decimal) -> bool:
        return subtotal >= self.minimum_spend

    def amount(self, subtotal: Decimal) -> Decimal:
        if not self.applies_to(subtotal):
            return Decimal("0")
        by_percent = subtotal * self.percent / 100
        return round_money(min(subtotal, by_percent + self.fixed))


@dataclass
class Order:
    customer: str
    lines: list[Line] = field(default_factory=list)
    discount: Discount | None = None

    def add(self, product: Product, quantity: int = 1) -> None:
        if quantity <= 0:
            raise OrderError(f"{product.sku}: the quantity must be at least 1")
        for line in self.lines:
            if line.product.sku == product.sku:
                line.quantity += quantity
                return
        self.lines.append(Line(product, quantity))

    def remove(self, sku: str) -> None:
        before = len(self.lines)
        self.lines = [line for line in self.lines if line.product.sku != sku]
        if len(self.lines) == before:
            raise OrderError(f"{sku}: not in the order")

    @property
    def subtotal(self) -> Decimal:
        return sum((line.subtotal for line in self.lines), Decimal("0"))

    @property
    def discount_amount(self) -> Decimal:
        if self.discount is None:
            return Decimal("0")
        return self.discount.amount(self.subtotal)

    @property
    def tax(self) -> Decimal:
        total = sum((line.tax for line in self.lines), Decimal("0"))
        if not self.subtotal:
            return total
        # The discount lowers the tax in proportion to the price it takes off.
        share = self.discount_amount / self.subtotal
        return round_money(total * (1 + share))

    @property
    def total(self) -> Decimal:
        return round_money(self.subtotal - self.discount_amount + self.tax)


def round_money(value: Decimal) -> Decimal:
    """Round to whole cents, halves away from zero, as the till does."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def parse_catalog(rows: Iterable[str]) -> dict[str, Product]:
    """Products from lines of 'sku;name;price;band' (the band may be left out)."""
    products: dict[str, Product] = {}
    for number, row in enumerate(rows, start=1):
        row = row.strip()
        if not row or row.startswith("#"):
            continue
        parts = [part.strip() for part in row.split(";")]
        if len(parts) not in (3, 4):
            raise OrderError(f"line {number}: expected 3 or 4 fields, got {len(parts)}")
        sku, name, price = parts[:3]
        band = parts[3] if len(parts) == 4 else "standard"
        if sku in products:
            raise OrderError(f"line {number}: {sku} is listed twice")
        products[sku] = Product(sku, name, Decimal(price), band)
    return products


def receipt(order: Order) -> str:
    """The order as the printed receipt shows it."""
    width = 40
    rows = [f"Receipt for {order.customer}".center(width), "-" * width]
    for line in order.lines:
        label = f"{line.quantity} x {line.product.name}"
        rows.append(f"{label:<30}{line.subtotal:>10}")
    rows.append("-" * width)
    rows.append(f"{'Subtotal':<30}{order.subtotal:>10}")
    if order.discount_amount:
        rows.append(f"{'Discount ' + order.discount.code:<30}{-order.discount_amount:>10}")
    rows.append(f"{'Tax':<30}{order.tax:>10}")
    rows.append(f"{'Total':<30}{order.total:>10}")
    return "\n".join(rows)


if __name__ == "__main__":
    catalog = parse_catalog([
        "A1;Tea;3.50;reduced",
        "B2;Mug;8.00",
        "C3;Book;12.99;zero",
    ])
    order = Order("Ada", discount=Discount("SPRING", percent=Decimal("10"), minimum_spend=Decimal("20")))
    order.add(catalog["A1"], 2)
    order.add(catalog["B2"])
    order.add(catalog["C3"])
    print(receipt(order))
