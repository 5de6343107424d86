"""The image mirror as Pulumi resources: the mirror's repositories, their fill and the dynamic resources that copy images into it."""
