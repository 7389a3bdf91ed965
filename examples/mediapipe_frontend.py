#!/usr/bin/env python3
"""A MediaPipe Holistic front end for SignFlow's live recognizer.

Reads a camera (or a video file), runs MediaPipe Holistic on each frame and writes one JSON line
per frame on stdout, in the format `infer stream --input -` reads (see the `infer::live` docs):

    python3 examples/mediapipe_frontend.py --camera 0 \
      | cargo run --release -p infer -- stream --model runs/<run> --input -

    python3 examples/mediapipe_frontend.py --video clip.mp4 \
      | cargo run --release -p infer -- stream --model runs/<run> --input - --json

Each line: {"frame": N, "face": [[x, y, z] x 468] | null, "left_hand": [[x, y, z] x 21] | null,
"pose": [[x, y, z] x 33] | null, "right_hand": [[x, y, z] x 21] | null}, in MediaPipe's
normalised image coordinates (what the ISLR data holds). A group MediaPipe did not detect is null.
Sign events are printed by `infer` as each sign ends.

Needs `pip install mediapipe opencv-python` (the legacy `mp.solutions.holistic` API). Not run in
CI: it needs a camera or a video and MediaPipe's models.
"""

import argparse
import json
import sys


def landmarks(group, count):
    if group is None:
        return None
    points = [[p.x, p.y, p.z] for p in group.landmark]
    # Holistic with refine_face_landmarks adds 10 iris points; the layout has the first 468.
    return points[:count]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--camera", type=int, help="camera index (cv2.VideoCapture)")
    src.add_argument("--video", help="a video file")
    ap.add_argument("--max-frames", type=int, default=0, help="stop after this many frames (0 = until the end)")
    a = ap.parse_args()

    import cv2
    import mediapipe as mp

    cap = cv2.VideoCapture(a.camera if a.video is None else a.video)
    if not cap.isOpened():
        sys.exit(f"cannot open {'camera ' + str(a.camera) if a.video is None else a.video}")
    frame = 0
    with mp.solutions.holistic.Holistic(static_image_mode=False, model_complexity=1) as holistic:
        while a.max_frames == 0 or frame < a.max_frames:
            ok, image = cap.read()
            if not ok:
                break
            results = holistic.process(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))
            line = {
                "frame": frame,
                "face": landmarks(results.face_landmarks, 468),
                "left_hand": landmarks(results.left_hand_landmarks, 21),
                "pose": landmarks(results.pose_landmarks, 33),
                "right_hand": landmarks(results.right_hand_landmarks, 21),
            }
            try:
                sys.stdout.write(json.dumps(line) + "\n")
                sys.stdout.flush()  # the recognizer works frame by frame
            except BrokenPipeError:
                break
            frame += 1
    cap.release()


if __name__ == "__main__":
    main()
