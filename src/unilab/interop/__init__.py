"""Other stacks' conventions, one module each: holosoma's deploy format (holosoma_inference's ONNX policy files: their
kinds, metadata, observation terms and action mapping; the clip a tracking file embeds is read and written by
``unilab.motion_io``), imported by ``eval`` and ``deploy``."""
