"""Cardiac MRI: the T5 site fields drawn with the world (``site_fields``), rendering
(``render``), anatomical templates (``templates``), the
environment's fixed baseline image analysis (``measure``) and fast writers
(``writer``)."""
