"""Other stacks' conventions, one module each: holosoma's deploy format (holosoma_inference's ONNX files: their
metadata, observation terms, action mapping and embedded clips), imported by ``eval`` and ``deploy``."""
