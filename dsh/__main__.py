from dsh.cli import main

raise SystemExit(main())
