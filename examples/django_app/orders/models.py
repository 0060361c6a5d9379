from django.db import models


class Order(models.Model):
    PLACED, RESERVED, SHIPPED = "placed", "reserved", "shipped"

    item = models.CharField(max_length=100)
    quantity = models.PositiveIntegerField()
    status = models.CharField(max_length=20, default=PLACED)
    tracking = models.CharField(max_length=40, blank=True)
    # The ductline run fulfilling the order (`ductline show RUN_ID`), once started.
    run_id = models.CharField(max_length=32, blank=True)
    created = models.DateTimeField(auto_now_add=True)
