"""The ECS GPU instance types the platform knows, and what one node of a pool can give to pods."""
