from contamscope.cli.main import main

main()
