"""kvscope's tests: analysis/ runs the engine alone (no Django), console/ the web console."""
