"""Offscreen rendering of simulation states (play videos)."""

from unilab.render.video import RenderUnavailable, render_states, select_gl_backend

__all__ = ["RenderUnavailable", "render_states", "select_gl_backend"]
