"""Total Recall: ``adapter`` searches the markdown memory tiers in-process."""
