"""The model's calibration data: published training runs on modern hardware
(``published.py``) and the vTrain set's predicted against measured iteration times
(``vtrain.py``). bench/ and the tests read them; the designer does not.

May import: catalog/ and models/ only; no other package imports it (tests/test_layers.py).
"""
