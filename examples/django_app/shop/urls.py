from django.urls import path

from orders import views

urlpatterns = [
    path("orders/", views.place_order),
    path("orders/<int:order_id>/", views.order_status),
]
