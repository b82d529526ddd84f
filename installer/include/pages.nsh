; The installer's and the uninstaller's pages (Modern UI 2).

!include "MUI2.nsh"

!define MUI_ABORTWARNING
!define MUI_UNABORTWARNING
!define MUI_COMPONENTSPAGE_SMALLDESC

!define MUI_WELCOMEPAGE_TEXT "This installs ${APP_NAME} ${APP_VERSION}, an AI assistant that runs on this computer, for you alone: no administrator rights are needed.$\r$\n$\r$\nIf ${APP_NAME} is installed already, it is updated; your chats, settings and models stay.$\r$\n$\r$\nClick Next to continue."
!insertmacro MUI_PAGE_WELCOME
!insertmacro MUI_PAGE_COMPONENTS
!define MUI_PAGE_CUSTOMFUNCTION_LEAVE DirectoryLeave
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_INSTFILES
!define MUI_FINISHPAGE_RUN "$INSTDIR\${GUI_EXE}"
!define MUI_FINISHPAGE_RUN_TEXT "Start ${APP_NAME} now"
!insertmacro MUI_PAGE_FINISH

!insertmacro MUI_UNPAGE_CONFIRM
!insertmacro MUI_UNPAGE_COMPONENTS
!insertmacro MUI_UNPAGE_INSTFILES

!insertmacro MUI_LANGUAGE "English"

Function .onInit
  Call FindPreviousInstall
FunctionEnd

; Before the Install button does anything: a running Kestrel holds its files open.
; Cancel keeps the user on this page, to close it and click Install again.
Function DirectoryLeave
  Call CloseRunningKestrel
  ${If} $KestrelClosed == "cancel"
    Abort
  ${EndIf}
FunctionEnd
