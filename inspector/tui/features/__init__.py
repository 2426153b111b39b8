"""One mixin of the App per feature (navigation, filters, editing, saving, diffing, verdict, tree, sessions): its actions, workers and the modal it opens."""
