"""Ready-made models (the application layer): import a model's package to use it, e.g.
``from workbench.models import yolov8``. Nothing is imported here, so ``import workbench``
stays light."""
