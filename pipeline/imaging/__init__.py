"""Cardiac MRI: rendering (``render``), anatomical templates (``templates``), the
environment's fixed baseline image analysis (``measure``) and fast writers
(``writer``)."""
