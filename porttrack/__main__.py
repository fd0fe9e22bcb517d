from porttrack.cli import main

raise SystemExit(main())
