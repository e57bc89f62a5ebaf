"""Reference clips in and out of other formats: holosoma / BeyondMimic npz (our own clip format), the Unitree
LAFAN1-retargeted CSV layout, and the clip embedded in a holosoma whole-body-tracking ONNX file.

``clip``: the in-memory clip and the checks that name a bad cell by file, row and column; ``kinematics``: resampling,
finite-difference velocities and the root <-> body poses by forward kinematics; one module per format
(``npz_format``, ``csv_format``, ``onnx_format`` with ``onnx_tables``, the graph layout); ``formats``: the table of
formats and their frame rates; ``convert``: read any, write any (``unilab-assets import-clip`` / ``export-clip``).
"""
