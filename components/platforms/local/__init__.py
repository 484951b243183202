"""The `local` platform: services as detached processes on 127.0.0.1."""
