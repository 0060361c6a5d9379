"""What ductline workers import: ``ductline worker --app shop.worker``, run from this
project's folder.

Django is set up first, so that the pipelines' modules can import models. Every step
child imports this module before its first attempt, so steps use the ORM as views
do.
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
django.setup()

from orders.pipelines import fulfil  # noqa: E402  (after setup: it imports models)

__all__ = ["fulfil"]
