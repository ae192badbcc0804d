"""Published training runs and the vTrain set: the model's calibration data."""
