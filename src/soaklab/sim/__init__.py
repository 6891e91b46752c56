"""Simulation backends: MuJoCo on the CPU (mujoco_cpu) and MuJoCo Warp on the GPU (mjwarp)."""
