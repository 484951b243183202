"""The validation job as part of the stack: its input, its package (one zip), the component that runs it."""
