"""Builders of the objects a training job becomes, on every backend and for every framework."""
