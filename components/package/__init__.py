"""The components as a Pulumi component package for every language, its generated input types, and the docs' generated reference."""
