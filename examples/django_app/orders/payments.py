"""A stand-in for a payment provider's authorization call."""

# The card number payment providers conventionally decline in their test modes.
DECLINED_CARD = "4000000000000002"


class PaymentDeclined(Exception):
    pass


def authorize(card: str, quantity: int) -> None:
    """Raises:
        PaymentDeclined: the provider refused the card.
    """
    if card.replace(" ", "") == DECLINED_CARD:
        raise PaymentDeclined("the card was declined")
