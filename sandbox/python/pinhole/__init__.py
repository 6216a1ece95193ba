"""Pinhole for Python workers: pinhole.execd talks to pinhole-execd."""
