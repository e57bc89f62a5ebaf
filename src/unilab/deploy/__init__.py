"""What leaves the trainer: an ONNX policy whose metadata lets a robot stack use it without unilab."""
