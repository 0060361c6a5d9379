"""Settings of the shop project: one app, orders, whose placed orders are fulfilled by
a ductline pipeline.

ductline itself is configured by the environment (or a ductline.toml), the same for
the web processes and the workers: DUCTLINE_DATABASE_URL names its database (default:
the SQLite file ductline.db in the working directory). Its tables may share Django's
PostgreSQL database (they are all named ductline_*), but a trigger is never part of a
Django transaction: it commits on ductline's own connection. Hence
transaction.on_commit in orders/views.py.
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "only-for-the-example-set-DJANGO_SECRET_KEY")
DEBUG = os.environ.get("DJANGO_DEBUG") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = ["orders"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "shop.urls"
WSGI_APPLICATION = "shop.wsgi.application"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_DATABASE", str(BASE_DIR / "shop.sqlite3")),
        # The web process and the workers' step children write to the same file.
        "OPTIONS": {"timeout": 20},
    }
}

USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
