"""A trained policy put to use: a finished run read back (trained), rolled out (rollout), exported to
ONNX (export), played to video (play, gl), judged from the clip's first frame (evaluate), and what a
completed standalone run does with it last (post_training)."""
