"""Capture: TorchDynamo + AOTAutograd turn user code into ATen FX graphs."""
